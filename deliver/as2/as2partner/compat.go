package as2partner

import (
	"mime"
	"net/http"
	"strings"

	"github.com/floodgate-go/floodgate/deliver/as2"
)

// parseAS2Name parses an AS2-From or AS2-To header value liberally: an
// AS2-name of RFC 4130 §6.2, quoted or not, and also an unquoted name that
// holds spaces (or '"' or '\'), as some products send them. Surrounding
// spaces are trimmed; it fails only for a value that is no AS2 ID at all
// (empty, longer than 128 characters, or not printable ASCII).
func parseAS2Name(v string) (string, error) {
	id, err := as2.ParseAS2ID(v)
	if err == nil {
		return id, nil
	}
	if t := strings.TrimSpace(v); as2.ValidAS2ID(t) && !strings.HasPrefix(t, `"`) {
		return t, nil
	}
	return "", err
}

// filenameOf returns the filename of the payload's Content-Disposition
// (RFC 2183, RFC 6266; filename* preferred), from the payload entity's
// header, or from the HTTP header of a plain message; "" if none.
func filenameOf(entity map[string][]string, hh http.Header) string {
	cd := ""
	if entity != nil {
		if v := entity["Content-Disposition"]; len(v) > 0 {
			cd = v[0]
		}
	} else {
		cd = hh.Get("Content-Disposition")
	}
	if cd == "" {
		return ""
	}
	_, params, err := mime.ParseMediaType(cd)
	if err != nil {
		return ""
	}
	return params["filename"]
}

// Filenames returns a copy of the payload filenames received
// (Content-Disposition), by Message-ID as sent, for the messages processed
// that carried one; the last one received wins for a duplicate. Filenames
// come from the sender as they are: the partner does not store files.
func (p *Partner) Filenames() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]string, len(p.filenames))
	for k, v := range p.filenames {
		out[k] = v
	}
	return out
}
