package ctrlhost

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Level is a log level.
type Level int

const (
	LevelDebug Level = iota
	LevelInfo
	LevelWarning
	LevelError
)

var levelNames = [...]string{"debug", "info", "warning", "error"}

// ParseLevel reads "debug", "info", "warning" or "error".
func ParseLevel(s string) (Level, error) {
	for i, n := range levelNames {
		if strings.EqualFold(s, n) {
			return Level(i), nil
		}
	}
	return LevelInfo, fmt.Errorf("unknown log level %q", s)
}

// Logger writes structured records, one `key=value` line each, the format of the other SDKs:
//
//	ts=2026-11-22T03:40:00.123Z level=info msg=reconciled controller=webapp name=shop
//
// The host captures a plugin's stderr and tags each line with the plugin. A Logger is safe for
// concurrent use: each record is one Write under a lock.
type Logger struct {
	mu  sync.Mutex
	out io.Writer // guarded by mu
	min Level
	// fields are appended to every record (With).
	fields []any
	parent *Logger // the Logger owning mu and out, nil for a root
}

// NewLogger writes records at or above min to out.
func NewLogger(out io.Writer, min Level) *Logger { return &Logger{out: out, min: min} }

// defaultLogger logs to stderr at $CTRLHOST_LOG_LEVEL (default info).
func defaultLogger() *Logger {
	level, err := ParseLevel(os.Getenv("CTRLHOST_LOG_LEVEL"))
	if err != nil {
		level = LevelInfo
	}
	return NewLogger(os.Stderr, level)
}

// With is a Logger adding keyvals (key, value, key, value, ...) to every record.
func (l *Logger) With(keyvals ...any) *Logger {
	root := l.root()
	fields := append(append([]any{}, l.fields...), keyvals...)
	return &Logger{min: l.min, fields: fields, parent: root}
}

func (l *Logger) root() *Logger {
	if l.parent != nil {
		return l.parent
	}
	return l
}

// Enabled reports whether records at level are written.
func (l *Logger) Enabled(level Level) bool { return level >= l.min }

func (l *Logger) Debug(msg string, keyvals ...any) { l.log(LevelDebug, msg, keyvals) }
func (l *Logger) Info(msg string, keyvals ...any)  { l.log(LevelInfo, msg, keyvals) }
func (l *Logger) Warn(msg string, keyvals ...any)  { l.log(LevelWarning, msg, keyvals) }
func (l *Logger) Error(msg string, keyvals ...any) { l.log(LevelError, msg, keyvals) }

func (l *Logger) log(level Level, msg string, keyvals []any) {
	if l == nil || level < l.min {
		return
	}
	var b strings.Builder
	b.WriteString("ts=")
	b.WriteString(time.Now().UTC().Format("2006-01-02T15:04:05.000Z"))
	b.WriteString(" level=")
	b.WriteString(levelNames[level])
	b.WriteString(" msg=")
	b.WriteString(quote(msg))
	all := append(append([]any{}, l.fields...), keyvals...)
	for i := 0; i < len(all); i += 2 {
		b.WriteByte(' ')
		b.WriteString(quote(fmt.Sprint(all[i])))
		b.WriteByte('=')
		if i+1 < len(all) {
			b.WriteString(quote(fmt.Sprint(all[i+1])))
		} else {
			b.WriteString(`"(missing)"`)
		}
	}
	b.WriteByte('\n')
	root := l.root()
	root.mu.Lock()
	defer root.mu.Unlock()
	_, _ = io.WriteString(root.out, b.String()) // a closed stderr must not take the plugin down
}

func quote(s string) string {
	if s != "" && !strings.ContainsAny(s, " =\"\n\t\\") && isPrintable(s) {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}

func isPrintable(s string) bool {
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}
