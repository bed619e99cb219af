/* output.h - how the flashc command writes its result (-o FILE).
 *
 * The rule: a failed compile never touches FILE, and flashc never removes
 * or replaces anything it did not create. The compiler writes into memory;
 * only a successful result is written out, by output_write:
 *   - FILE is missing or a regular file (possibly behind symlinks): a
 *     temporary file beside the target, renamed over it (readers never see
 *     half a kernel; the target keeps its permission bits);
 *   - FILE is something else (/dev/null, a character device, a FIFO): it is
 *     opened and written in place, never unlinked;
 *   - FILE is a directory: an error.
 */
#ifndef FLASHC_TOOLS_OUTPUT_H
#define FLASHC_TOOLS_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>

/* Refuses an output that would destroy the input: FILE and INPUT name the
 * same file (same device and inode), or FILE is a directory. INPUT "-" is
 * standard input. Returns true when FILE may be written; otherwise prints
 * `flashc: error: ...` to stderr. */
bool output_allowed(const char *file, const char *input);

/* Writes len bytes to FILE as described above. Returns 0, or -1 after
 * printing `flashc: error: ...` to stderr (FILE is then as it was, unless
 * it is not a regular file and the write itself failed). */
int output_write(const char *file, const char *data, size_t len);

/* Flushes standard output and says whether everything written to it
 * arrived (a full disk, a closed pipe); prints the error when not. */
bool output_stdout_ok(void);

#endif
