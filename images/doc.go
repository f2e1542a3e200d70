// Package images pulls OCI and Docker images and keeps their layers,
// unpacked, in a cache on the instance, ready to be stacked as the
// lower directories of an overlay root (see package jobroot).
//
// A layer is unpacked once per digest into its own directory and shared by
// every image and job that uses it. Layers come from registries berth does
// not control, so unpacking treats every tarball as hostile: no entry may
// leave the layer directory (absolute paths, "..", symlinked parents),
// device nodes and FIFOs are skipped, setuid and setgid bits dropped,
// hardlinks must point inside the same layer, and the compressed stream's
// digest is checked before the layer is used. A layer is unpacked into a
// temporary directory and renamed into place only when complete and
// verified, so a crash, a corrupt layer or a full disk never leaves a half
// layer that a later job would use.
//
// Whiteouts become what overlayfs mounted with userxattr understands: a
// character device 0/0 for a deleted path (which the kernel lets an
// unprivileged user create) and the user.overlay.opaque xattr for an opaque
// directory.
package images
