// Command measure drives real danyue daemon processes through the phases of
// a library's life and reports, for each, its speed and what it costs:
// peak anonymous memory (RssAnon, sampled every 10 ms from /proc), the Go
// heap (from the daemon's GODEBUG=gctrace=1 lines), with file-backed pages
// (RssFile) and the kernel's peak (VmHWM) beside them, and, after a burst
// of writes, wakeups and CPU time. It is the one measuring command of the
// project; bench/RESULTS.md holds what it measured.
//
//	go run ./bench/cmd/measure [-bin [NAME=]PATH]... [-runs N] [-phase P,...] [-books N] [-json FILE]
//
// Each -bin is a build of danyue to measure (default: ./cmd/danyue of this
// checkout, built first), so that one run compares today's build with an
// older one: the builds take turns run by run (A B A B), so that a change in
// the machine's load falls on both. A build that lacks what a phase needs
// (pages of the shelf, say) is reported as not supporting it. The phases:
//
//	write      bulk API writes of -books books by 16 clients, with the
//	           daemon's CPU time and wakeups a write, then the anonymous
//	           memory left -after-writes (30 s) after them
//	restart    a daemon with -books books starting: API up, then the first page of 50
//	join       a new device joining the library from two holders of -books books
//	list       listing the whole shelf of -books books in pages of 1,000
//	apps       64 reader apps' mixed requests (bench/mixload) on -books books
//	settle     two paired daemons after a burst of 100 writes: the 30 s that
//	           follow, then 30 s of steady idle from 90 s after the burst
//	propagate  a write on one of two daemons to the event on the other's /v1/events
//	connect    a paired daemon restarting until it is connected to the other
//	flood      a member offering -flood-records records at once
//
// Linux only: it reads /proc.
package main
