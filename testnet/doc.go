// Package testnet starts several real danyue daemons, in-process on loopback or
// as processes in network namespaces, and drives them through their real API to
// prove the product under partitions, crashes and skewed clocks.
package testnet
