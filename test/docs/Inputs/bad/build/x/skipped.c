/* Build folders are not read: docs/perf-log.md P99. */
