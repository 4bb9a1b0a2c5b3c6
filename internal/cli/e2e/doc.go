// Package e2e holds the end-to-end tests of the idlegrid binary: they build
// it once, run a real server and real agents as separate processes on
// loopback ports, drive a job through the command line from submission to
// a charged completion, and check the ledger afterwards, against SQLite and
// (when IDLEGRID_TEST_POSTGRES is set) PostgreSQL. It has no code of its own.
package e2e
