/*
 * check.h — a small FileCheck-like matcher for golden tests of printed IR (and, later, emitted
 * CUDA): the expectations are `// CHECK:` lines in the golden file, matched in order against the
 * text the test produced.
 *
 * Directives (the pattern is a literal substring, trimmed of surrounding blanks):
 *   CHECK: pat       pat occurs at or after the end of the previous match
 *   CHECK-NEXT: pat  pat occurs on the line right after the line of the previous match
 *   CHECK-NOT: pat   pat does not occur between the previous match and the next one (or the end
 *                    of the text when no positive directive follows)
 * A directive is recognised on any line where it follows "//" and optional blanks.
 */
#ifndef AMPC_TEST_CHECK_H
#define AMPC_TEST_CHECK_H

/* Matches `text` against the directives in `spec` (named `spec_name` in messages). Returns NULL
 * when every directive holds, else a malloc'ed message naming the failing directive (spec line and
 * pattern) and the place in `text` where the search happened. A spec without any CHECK or
 * CHECK-NEXT fails: a golden test must check something. */
char *t_check_match(const char *spec, const char *text, const char *spec_name);

/* Asserts t_check_match succeeds; on failure the message and the whole text are reported. */
void t_expect_check(const char *spec, const char *text, const char *spec_name);

#endif
