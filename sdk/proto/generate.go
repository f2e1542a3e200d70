// Package proto holds the berth provider plugin protocol: provider.proto and
// the Go code generated from it. Plugin authors do not use it directly; the
// sdk package serves it.
package proto

// Regenerating needs protoc (Debian: apt-get install protobuf-compiler) and
// the two Go generators on PATH:
//
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
//
//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative provider.proto
