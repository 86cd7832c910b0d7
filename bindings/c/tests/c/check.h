/* Tiny test harness for the C programs of scripts/lanes/c: each test is a function, each
 * check exits with a message naming the line, and the program ends with a libtest-style
 * "test result:" line that scripts/test counts. C99 and C++17. */
#ifndef PINFRAME_CHECK_H
#define PINFRAME_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinframe.h"

static int check_passed = 0;

#define CHECK(cond)                                                                    \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);         \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

/* The call succeeds. */
#define OK(call)                                                                       \
  do {                                                                                 \
    pinframe_status ok_status_ = (call);                                               \
    if (ok_status_ != PINFRAME_OK) {                                                   \
      fprintf(stderr, "%s:%d: %s returned %d (%s): %s\n", __FILE__, __LINE__, #call,   \
              (int)ok_status_, pinframe_status_name(ok_status_), pinframe_last_error()); \
      exit(1);                                                                         \
    }                                                                                  \
    CHECK(pinframe_last_error()[0] == '\0');                                           \
  } while (0)

/* The call fails with `code` and a message containing `needle`. */
#define FAILS(call, code, needle)                                                      \
  do {                                                                                 \
    pinframe_status fails_status_ = (call);                                            \
    if (fails_status_ != (code)) {                                                     \
      fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d (%s): %s\n", __FILE__,  \
              __LINE__, #call, (int)fails_status_, pinframe_status_name(fails_status_), \
              (int)(code), pinframe_status_name(code), pinframe_last_error());         \
      exit(1);                                                                         \
    }                                                                                  \
    if (strstr(pinframe_last_error(), (needle)) == NULL) {                             \
      fprintf(stderr, "%s:%d: %s: message \"%s\" lacks \"%s\"\n", __FILE__, __LINE__,  \
              #call, pinframe_last_error(), (needle));                                 \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

/* A NULL argument is reported as such, naming the argument. */
#define NULL_ARG(call, name) FAILS(call, PINFRAME_ERROR_NULL_POINTER, "`" name "`")

/* Set from argv by a program that takes test names: only those run (none set: all). */
static const char *check_only = NULL;

#define RUN(test)                                                                      \
  do {                                                                                 \
    if (check_only != NULL && strcmp(check_only, #test) != 0) break;                   \
    test();                                                                            \
    printf("test %s ... ok\n", #test);                                                 \
    fflush(stdout);                                                                    \
    check_passed++;                                                                    \
  } while (0)

#define SUMMARY()                                                                      \
  printf("\ntest result: ok. %d passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n\n", \
         check_passed)

#endif
