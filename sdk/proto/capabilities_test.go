package proto

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"
)

// TestDisposableIsFieldFour pins the wire form of Capabilities.disposable:
// an old plugin or host that knows fields 1-3 only must skip it, and a new
// one reading an old message must see false.
func TestDisposableIsFieldFour(t *testing.T) {
	b, err := proto.Marshal(&Capabilities{Disposable: true})
	if err != nil {
		t.Fatal(err)
	}
	// Tag (4<<3 | varint) = 0x20, then true.
	if want := []byte{0x20, 0x01}; !bytes.Equal(b, want) {
		t.Errorf("Capabilities{Disposable: true} = % x; want % x", b, want)
	}
	var got Capabilities
	if err := proto.Unmarshal(b, &got); err != nil || !got.GetDisposable() {
		t.Errorf("round trip = %+v, %v; want disposable", &got, err)
	}
	// A plugin from before the field: suspend and recycle only.
	old := []byte{0x08, 0x01, 0x18, 0x01}
	got = Capabilities{}
	if err := proto.Unmarshal(old, &got); err != nil || !got.GetSuspend() || !got.GetRecycle() || got.GetDisposable() {
		t.Errorf("an old plugin's capabilities = %+v, %v; want suspend and recycle, not disposable", &got, err)
	}
}

// TestRequestedSizeIsFieldFive pins the wire form of
// Capabilities.requested_size, as TestDisposableIsFieldFour does for its
// neighbour: a plugin from before the field reads as not claiming it.
func TestRequestedSizeIsFieldFive(t *testing.T) {
	b, err := proto.Marshal(&Capabilities{RequestedSize: true})
	if err != nil {
		t.Fatal(err)
	}
	// Tag (5<<3 | varint) = 0x28, then true.
	if want := []byte{0x28, 0x01}; !bytes.Equal(b, want) {
		t.Errorf("Capabilities{RequestedSize: true} = % x; want % x", b, want)
	}
	old := []byte{0x08, 0x01, 0x20, 0x01} // suspend and disposable
	var got Capabilities
	if err := proto.Unmarshal(old, &got); err != nil || !got.GetDisposable() || got.GetRequestedSize() {
		t.Errorf("an old plugin's capabilities = %+v, %v; want disposable, not requested_size", &got, err)
	}
}
