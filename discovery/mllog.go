package discovery

import (
	"strings"

	"github.com/rs/zerolog"
)

// memberlistLog routes memberlist's standard-library log lines into zerolog.
// memberlist writes one line per call, "[LEVEL] memberlist: message", with the
// levels DEBUG, INFO, WARN and ERR (serf adds TRACE); the prefix becomes the
// zerolog level.
type memberlistLog struct {
	log zerolog.Logger
}

// Write logs one memberlist line; it never fails.
func (w memberlistLog) Write(p []byte) (int, error) {
	lvl, msg := parseMemberlistLine(string(p))
	if msg != "" {
		w.log.WithLevel(lvl).Msg(msg)
	}
	return len(p), nil
}

// parseMemberlistLine splits "[WARN] memberlist: msg\n" into a level and "msg".
// Lines without a known prefix are logged at info.
func parseMemberlistLine(line string) (zerolog.Level, string) {
	line = strings.TrimRight(line, "\r\n")
	lvl := zerolog.InfoLevel
	if rest, ok := strings.CutPrefix(line, "["); ok {
		if tag, msg, ok := strings.Cut(rest, "]"); ok {
			known := true
			switch strings.ToUpper(tag) {
			case "TRACE":
				lvl = zerolog.TraceLevel
			case "DEBUG":
				lvl = zerolog.DebugLevel
			case "INFO":
				lvl = zerolog.InfoLevel
			case "WARN", "WARNING":
				lvl = zerolog.WarnLevel
			case "ERR", "ERROR":
				lvl = zerolog.ErrorLevel
			default:
				known = false
			}
			if known {
				line = strings.TrimSpace(msg)
			}
		}
	}
	line = strings.TrimPrefix(line, "memberlist: ")
	return lvl, line
}
