/* A known section: docs/perf-log.md P01. */
/* An unknown one: docs/perf-log.md P09. */
/* Wrapped over two lines, one id unknown: docs/perf-log.md
 * P02 and P11. */
/* A date instead of an id: docs/perf.md 2026-11-22. */
int cite;
