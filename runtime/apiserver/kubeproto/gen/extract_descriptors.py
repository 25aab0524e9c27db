# Writes every gzip-compressed FileDescriptorProto embedded in a Go binary (kubectl) to a directory,
# one file per .proto name. Usage: extract_descriptors.py BINARY OUT_DIR
import zlib, sys, os
data = open(sys.argv[1],'rb').read()
out = sys.argv[2]
i = 0; n = 0
while True:
    i = data.find(b'\x1f\x8b\x08\x00\x00\x00\x00\x00', i)
    if i < 0: break
    try:
        d = zlib.decompressobj(16+zlib.MAX_WBITS)
        raw = d.decompress(data[i:i+2000000])
        if d.eof and raw[:1] == b'\x0a':
            # FileDescriptorProto starts with field 1 (name)
            ln = raw[1]
            name = raw[2:2+ln]
            if name.endswith(b'.proto'):
                fn = name.decode('latin1').replace('/','__')
                open(os.path.join(out, fn), 'wb').write(raw); n += 1
    except Exception as e:
        pass
    i += 1
print(n)
