package ctrlhosttest

// Recording files, as `ctrlhost run --record` writes them (plugin.proto, "Recordings"): the 8
// bytes "CTRLREC\n", a RecordingHeader, then ReconcileRecords, every message preceded by its
// length as a base-128 varint. One controller's files share a directory, named
// 00000001.ctrlrec, 00000002.ctrlrec, ... in the order they were written. Errors name the file
// and the byte offset where the problem starts, with the texts `ctrlhost replay` and the other
// SDKs use.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	pb "ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1"
	"google.golang.org/protobuf/proto"
)

const (
	recordingMagic  = "CTRLREC\n"
	recordingFormat = 1
	// A longer record is refused as corrupt (a request and a response are 64 MiB at most).
	maxRecordBytes  = 256 << 20
	recordingSuffix = ".ctrlrec"
)

// recordingFile is one recording file read whole.
type recordingFile struct {
	path   string
	data   []byte // the whole file
	header *pb.RecordingHeader
	// headerEnd is where the first record starts: a rewrite keeps data[:headerEnd] as it was.
	headerEnd int
	records   []fileRecord
}

// fileRecord is one record with the bytes it was read from (a rewrite keeps them when the
// record is unchanged).
type fileRecord struct {
	offset int
	frame  []byte // length prefix and message
	record *pb.ReconcileRecord
}

// readRecording reads and checks the file at path: magic, header, every record.
func readRecording(path string) (*recordingFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(data, []byte(recordingMagic)) {
		return nil, fmt.Errorf("%s: not a ctrlhost recording (no CTRLREC magic at offset 0)", path)
	}
	f := &recordingFile{path: path, data: data, header: &pb.RecordingHeader{}}
	off := len(recordingMagic)
	body, next, err := readFrame(path, data, off, "header")
	if err != nil {
		return nil, err
	}
	if body == nil {
		return nil, fmt.Errorf("%s: ends before its header at offset %d: the recording was interrupted", path, off)
	}
	if proto.Unmarshal(body, f.header) != nil {
		return nil, fmt.Errorf("%s: the header at offset %d is not a valid RecordingHeader", path, off)
	}
	if f.header.GetFormat() > recordingFormat {
		return nil, fmt.Errorf("%s: recording format %d is newer than this reader (it reads format %d)",
			path, f.header.GetFormat(), recordingFormat)
	}
	f.headerEnd = next
	for off = next; off < len(data); off = next {
		body, next, err = readFrame(path, data, off, "record")
		if err != nil {
			return nil, err
		}
		r := &pb.ReconcileRecord{}
		if proto.Unmarshal(body, r) != nil {
			return nil, fmt.Errorf("%s: record at offset %d is not a valid ReconcileRecord", path, off)
		}
		f.records = append(f.records, fileRecord{offset: off, frame: data[off:next], record: r})
	}
	return f, nil
}

// readFrame reads the message framed at data[off:] (what: "header" or "record", for errors):
// its body and where the next frame starts. At the end of data: a nil body and no error.
func readFrame(path string, data []byte, off int, what string) (body []byte, next int, err error) {
	if off >= len(data) {
		return nil, off, nil
	}
	length, n := binary.Uvarint(data[off:])
	switch {
	case n == 0: // the length runs past the end of the file: at least one more byte is needed
		return nil, 0, cutShort(path, what, off, len(data)-off, len(data)-off+1)
	case n < 0:
		return nil, 0, fmt.Errorf("%s: %s at offset %d has a malformed length", path, what, off)
	case length > maxRecordBytes:
		return nil, 0, fmt.Errorf("%s: %s at offset %d claims %d bytes, more than the limit of %d bytes: the file is corrupt",
			path, what, off, length, maxRecordBytes)
	}
	end := off + n + int(length)
	if end > len(data) {
		return nil, 0, cutShort(path, what, off, len(data)-off, end-off)
	}
	return data[off+n : end], end, nil
}

// cutShort: have and want count the frame from its start, length prefix and message.
func cutShort(path, what string, off, have, want int) error {
	return fmt.Errorf("%s: %s at offset %d is cut short (%d of %d bytes): the recording was interrupted",
		path, what, off, have, want)
}

// appendFrame appends msg with its length prefix.
func appendFrame(b []byte, msg proto.Message) ([]byte, error) {
	body, err := proto.Marshal(msg)
	if err != nil {
		return nil, err
	}
	return append(binary.AppendUvarint(b, uint64(len(body))), body...), nil
}

// rewriteRecording writes f with the records of replaced (by index) in place of the ones read:
// the magic, the header and every other record keep their bytes. A temporary file in the same
// directory is renamed over the file, so a reader sees the old file or the new one, whole.
func rewriteRecording(f *recordingFile, replaced map[int]*pb.ReconcileRecord) error {
	out := append([]byte(nil), f.data[:f.headerEnd]...)
	for i, r := range f.records {
		if rec, ok := replaced[i]; ok {
			var err error
			if out, err = appendFrame(out, rec); err != nil {
				return fmt.Errorf("%s: record at offset %d: %v", f.path, r.offset, err)
			}
			continue
		}
		out = append(out, r.frame...)
	}
	info, err := os.Stat(f.path)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.path), "."+filepath.Base(f.path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if _, err := tmp.Write(out); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(info.Mode().Perm()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), f.path)
}

// findRecording lists the recording files of controller under path, in the order they were
// written: path itself when it is a file; the recording files of a directory; or those of
// path/<controller>/ in a directory with one subdirectory per controller (with controller
// empty, the directory must hold exactly one).
func findRecording(path, controller string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: no such file or directory", path)
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	files, err := recordingFiles(path)
	if err != nil || len(files) > 0 {
		return files, err
	}
	var controllers []string
	entries, _ := os.ReadDir(path)
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if sub, _ := recordingFiles(filepath.Join(path, e.Name())); len(sub) > 0 {
			controllers = append(controllers, e.Name())
		}
	}
	found := "none"
	if len(controllers) > 0 {
		found = "found: " + strings.Join(controllers, ", ")
	}
	switch {
	case controller != "":
		for _, c := range controllers {
			if c == controller {
				return recordingFiles(filepath.Join(path, c))
			}
		}
		return nil, fmt.Errorf("%s: holds no recording of controller %s (%s)", path, controller, found)
	case len(controllers) == 1:
		return recordingFiles(filepath.Join(path, controllers[0]))
	case len(controllers) > 1:
		return nil, fmt.Errorf("%s: holds recordings of several controllers (%s): name one", path, found)
	}
	return nil, fmt.Errorf("%s: holds no recording files (*%s), directly or per controller", path, recordingSuffix)
}

// recordingFiles lists the recording files of dir (named <at least 8 digits>.ctrlrec) by
// sequence.
func recordingFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", dir, errors.Unwrap(err))
	}
	type indexed struct {
		index uint64
		path  string
	}
	var found []indexed
	for _, e := range entries {
		digits := strings.TrimSuffix(e.Name(), recordingSuffix)
		index, err := strconv.ParseUint(digits, 10, 64)
		if e.IsDir() || digits == e.Name() || len(digits) < 8 || err != nil {
			continue
		}
		found = append(found, indexed{index, filepath.Join(dir, e.Name())})
	}
	sort.Slice(found, func(i, j int) bool { return found[i].index < found[j].index })
	files := make([]string, len(found))
	for i, f := range found {
		files[i] = f.path
	}
	return files, nil
}
