package as2

import (
	"context"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MetaFilename is the message metadata key whose value [Sender.SendMessage]
// sends as the payload's filename, overriding Config.Filename.
const MetaFilename = "as2-filename"

// maxFilenameLen bounds a filename, in bytes: the limit of most file
// systems.
const maxFilenameLen = 255

// SanitizeFilename returns name as a bare file name that is safe to send
// and to store (RFC 6266 §4.3): invalid UTF-8 dropped, only the part after
// the last '/' or '\' kept, control and format characters (such as U+202E)
// and '"' dropped, spaces and dots trimmed from both ends, and the result
// cut to 255 bytes at a character boundary. It returns "" when nothing is
// left ("", "..", "a/"). It never fails.
func SanitizeFilename(name string) string {
	name = strings.ToValidUTF8(name, "")
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	name = strings.Map(func(r rune) rune {
		if r == '"' || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, name)
	name = strings.Trim(name, " .")
	if len(name) > maxFilenameLen {
		cut := maxFilenameLen
		for cut > 0 && !utf8.RuneStart(name[cut]) {
			cut--
		}
		name = strings.TrimRight(name[:cut], " .")
	}
	return name
}

// contentDisposition returns the Content-Disposition value for a sanitised
// filename (RFC 2183 §2.3): a quoted filename when it is ASCII, else an
// ASCII fallback ('_' for each other character) followed by filename* in
// UTF-8 percent-encoding (RFC 6266 §4.3, RFC 8187), which receivers that
// know it prefer.
func contentDisposition(name string) string {
	ascii := true
	for i := 0; i < len(name); i++ {
		if name[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		return `attachment; filename="` + name + `"`
	}
	fallback := strings.Map(func(r rune) rune {
		if r >= 0x80 {
			return '_'
		}
		return r
	}, name)
	var b strings.Builder
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(name); i++ {
		c := name[i]
		if isAttrChar(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		}
	}
	return `attachment; filename="` + fallback + `"; filename*=UTF-8''` + b.String()
}

// isAttrChar reports whether c is an RFC 8187 §3.2.1 attr-char, sent
// unencoded in an ext-value.
func isAttrChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$&+-.^_`|~", c) >= 0
}

// SendMessage is [Sender.Send] for a message with metadata (a Watermill
// message.Metadata can be passed as it is). Metadata is untrusted: its
// [MetaFilename] value is sent as the payload's filename after
// [SanitizeFilename]; a value that sanitises to nothing, or an absent one,
// falls back to Config.Filename. A bad filename never fails the message:
// the partner gets the bare, cleaned name (RFC 6266 §4.3 asks receivers to
// do the same). Other metadata is ignored. Safe for concurrent use.
func (s *Sender) SendMessage(ctx context.Context, id string, payload []byte, metadata map[string]string) (*MDN, error) {
	return s.send(ctx, id, payload, s.messageFilename(metadata))
}

// messageFilename returns the filename to send for a message's metadata.
func (s *Sender) messageFilename(metadata map[string]string) string {
	if name := SanitizeFilename(metadata[MetaFilename]); name != "" {
		return name
	}
	return s.cfg.Filename
}
