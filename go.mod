module github.com/brokernet/brokernet

go 1.26

require (
	github.com/BurntSushi/toml v1.6.0 // indirect
	github.com/go-stomp/stomp/v3 v3.1.3 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/rs/zerolog v1.35.1 // indirect
	golang.org/x/sys v0.29.0 // indirect
)
