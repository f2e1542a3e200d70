package queue

import "syscall"

// outOfInodes says whether the file system holding dir reports no free
// inode. File systems that do not count inodes (btrfs reports 0 of 0)
// never are.
func outOfInodes(dir string) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return false
	}
	return st.Files > 0 && st.Ffree == 0
}
