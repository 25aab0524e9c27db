// The ctrlhost plugin SDK for Go. Tested with the versions below (Debian bookworm's packages,
// built offline in GOPATH mode by build.sh); with network access, `go get ctrlhost.dev/sdk/go`
// resolves the same versions. The protocol code in gen/ is generated (go generate ./...), never
// committed.
module ctrlhost.dev/sdk/go

go 1.19

require (
	google.golang.org/grpc v1.33.3
	google.golang.org/protobuf v1.28.1
)
