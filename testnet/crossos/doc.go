// Package crossos holds the cross-OS sync scenario: a daemon of another OS
// (Windows under wine, Android under qemu, run by .ci/wine and
// .ci/android) and a Linux daemon in one library on loopback. Its test
// skips unless DANYUE_CROSSOS_CMD names the other OS's danyue command.
package crossos
