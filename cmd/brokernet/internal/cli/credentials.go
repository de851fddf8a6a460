package cli

import (
	"flag"
	"os"

	"github.com/brokernet/brokernet/config"
	"github.com/brokernet/brokernet/transport"
)

// Environment variables that hold broker credentials, so that no password
// needs to sit in argv where ps shows it. --broker-user and
// --broker-password-file win over them.
const (
	envBrokerUser     = "BROKERNET_BROKER_USER"
	envBrokerPassword = "BROKERNET_BROKER_PASSWORD"
)

// credentialFlags are the --broker-user and --broker-password-file flags of
// bridge and sidecar.
type credentialFlags struct {
	user, passwordFile string
}

func (c *credentialFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.user, "broker-user", "", "login for every broker URI without a passcode (default $"+envBrokerUser+")")
	fs.StringVar(&c.passwordFile, "broker-password-file", "", "file holding the password for --broker-user (default $"+envBrokerPassword+")")
}

// resolve returns the user and password from the flags, else the environment.
// warn is a note to log (a password file others can read).
func (c *credentialFlags) resolve() (user, password, warn string, err error) {
	user = c.user
	if user == "" {
		user = os.Getenv(envBrokerUser)
	}
	if c.passwordFile != "" {
		password, warn, err = config.ReadPasswordFile(c.passwordFile)
		if err != nil {
			return "", "", "", usagef("--broker-password-file: %v", err)
		}
	} else {
		password = os.Getenv(envBrokerPassword)
	}
	if password != "" && user == "" {
		return "", "", "", usagef("a broker password (--broker-password-file or $%s) needs a user (--broker-user or $%s)", envBrokerPassword, envBrokerUser)
	}
	return user, password, warn, nil
}

// applyCredentials gives u the credentials when it carries no passcode of its
// own; a login in u wins over user.
func applyCredentials(u transport.URI, user, password string) transport.URI {
	return u.WithDefaults(transport.Defaults{User: user, Password: password})
}
