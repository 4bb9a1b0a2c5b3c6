// Package idlegrid holds the domain of the idlegrid GPU marketplace: the
// nouns of the market (accounts, nodes, windows, asks, jobs, leases, ledger
// transfers), the one error type with machine codes, and the contracts that
// adapters implement. It does no I/O.
//
// Read this package first. The rest of the repository is arranged around it:
//
//	internal/market   the engine that matches jobs to nodes (pure)
//	internal/ledger   the posting rules that move money (pure)
//	internal/sqlstore the Store on SQLite or PostgreSQL
//	internal/server   the coordinator: store + engine + reapers
//	internal/httpapi  the HTTP JSON API under /v1
//	client            the public Go client of that API
//	internal/agent    the provider daemon
//	internal/cli      every subcommand of the idlegrid binary, and all wiring
//
// Money is always an integer number of micro-units (Micros); one unit is
// 1,000,000 micros. Prices are per GPU-hour.
package idlegrid
