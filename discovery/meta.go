package discovery

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/memberlist"

	"github.com/brokernet/brokernet/transport/stomp"
)

// MetaMaxSize is memberlist's limit on node metadata. memberlist panics when a
// delegate returns more ("Node meta data provided is longer than the limit"), so
// NewGossip checks the encoded LocalBroker against it first.
const MetaMaxSize = memberlist.MetaMaxSize

// ProtocolSTOMP is the LocalBroker.Protocol this version bridges; it is also the
// default for an empty Protocol.
const ProtocolSTOMP = "stomp"

// brokerMeta is the node metadata every brokernet member gossips: LocalBroker
// with short keys, since memberlist allows only MetaMaxSize bytes. Unknown keys
// are ignored on decoding, so fields can be added later.
type brokerMeta struct {
	URI        string `json:"u"`
	BrokerID   string `json:"id,omitempty"`
	BrokerName string `json:"n,omitempty"`
	Protocol   string `json:"p,omitempty"`
}

// ErrMetaTooLarge is matched (errors.Is) by NewGossip's error for a LocalBroker
// that does not fit in MetaMaxSize bytes once encoded.
var ErrMetaTooLarge = errors.New("advertised broker metadata too large")

// metaSizeError reports metadata over the limit; it matches ErrMetaTooLarge.
type metaSizeError struct{ n int }

func (e metaSizeError) Error() string {
	return fmt.Sprintf("advertised broker metadata is %d bytes, limit %d; shorten the URI or ids", e.n, MetaMaxSize)
}

func (e metaSizeError) Is(target error) bool { return target == ErrMetaTooLarge }

// encodeMeta encodes b, refusing anything memberlist would panic on. The URI
// goes out without credentials or local file names (publicURI).
func encodeMeta(b LocalBroker) ([]byte, error) {
	if u, err := stomp.ParseRemoteURI(b.URI); err == nil {
		b.URI = publicURI(u).WithSecrets()
	}
	meta, err := json.Marshal(brokerMeta{URI: b.URI, BrokerID: b.BrokerID, BrokerName: b.BrokerName, Protocol: b.Protocol})
	if err != nil {
		return nil, fmt.Errorf("encoding advertised broker metadata: %w", err)
	}
	if len(meta) > MetaMaxSize {
		return nil, metaSizeError{n: len(meta)}
	}
	return meta, nil
}

// decodeMeta turns another member's metadata into the peer to bridge to. Its
// errors never contain the passcode.
func decodeMeta(name string, meta []byte) (Peer, error) {
	var m brokerMeta
	if err := json.Unmarshal(meta, &m); err != nil {
		return Peer{}, fmt.Errorf("malformed broker metadata %q: %w", trimMeta(meta), err)
	}
	if m.Protocol != "" && m.Protocol != ProtocolSTOMP {
		return Peer{}, fmt.Errorf("advertised protocol %q is not supported (want %q)", trimMeta([]byte(m.Protocol)), ProtocolSTOMP)
	}
	if m.URI == "" {
		return Peer{}, errors.New("broker metadata has no URI")
	}
	u, err := stomp.ParseRemoteURI(m.URI)
	if err != nil {
		return Peer{}, fmt.Errorf("advertised URI: %w", err)
	}
	// What an older member may still advertise is ignored: credentials and
	// files come from the local configuration.
	u = publicURI(u)
	return Peer{Key: name, URIs: []stomp.URI{u}, BrokerID: m.BrokerID, BrokerName: m.BrokerName}, nil
}

// userinfo matches the credentials of a URI-looking string.
var userinfo = regexp.MustCompile(`://[^/\s"]*@`)

// trimMeta makes foreign metadata fit for a log line: credentials redacted,
// invalid UTF-8 replaced, cut to 64 bytes.
func trimMeta(b []byte) string {
	const max = 64
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s = userinfo.ReplaceAllString(s, "://***@")
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
