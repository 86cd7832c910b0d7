/* Two separately built shared objects, each containing its own copy of pinframe, loaded
 * into one process with dlopen(RTLD_LOCAL) (as a Python extension module and a GStreamer
 * plugin are):
 *
 *   guard_copies shared COPY_A.so COPY_B.so   both built with `shared-guard`: one guard
 *   guard_copies local  COPY_A.so COPY_B.so   both without it: two guards (the hazard)
 *   guard_copies absent COPY_A.so COPY_B.so   shared-guard copies, no libpinframe.so.0 on
 *                                             the loader's path: they refuse to map
 *
 * shared: while a thread in A holds the exclusive side, a map() in B waits until it is
 *   released; on the section's own thread B refuses a first mapping instead of waiting for
 *   A's section, and defers the unmapping of a tensor dropped inside it.
 * local: the same map() in B goes through while A holds its exclusive side, B maps
 *   inside A's section, and B unmaps at once: the negative, what the feature removes.
 * Ordered with pipes and with the guard's count of waiting threads, never by sleeps. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static int check_passed = 0;
#define CHECK(cond)                                                                    \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);         \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

struct copy {
  const char *path;
  void *handle;
  int (*guard_mode)(void);
  size_t (*guard_id)(void);
  size_t (*guard_waiters)(void);
  size_t (*live_mappings)(void);
  void (*excluded)(void (*)(void *), void *);
  int (*map_fresh)(void);
  void *(*new_mapped)(void);
  const void *(*tensor_addr)(void *);
  void (*drop)(void *);
};

static void *sym(struct copy *c, const char *name) {
  void *p = dlsym(c->handle, name);
  if (p == NULL) {
    fprintf(stderr, "%s: no %s: %s\n", c->path, name, dlerror());
    exit(1);
  }
  return p;
}

static void load(struct copy *c, const char *path) {
  c->path = path;
  c->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (c->handle == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    exit(1);
  }
  *(void **)&c->guard_mode = sym(c, "copy_guard_mode");
  *(void **)&c->guard_id = sym(c, "copy_guard_id");
  *(void **)&c->guard_waiters = sym(c, "copy_guard_waiters");
  *(void **)&c->live_mappings = sym(c, "copy_live_mappings");
  *(void **)&c->excluded = sym(c, "copy_excluded");
  *(void **)&c->map_fresh = sym(c, "copy_map_fresh");
  *(void **)&c->new_mapped = sym(c, "copy_new_mapped");
  *(void **)&c->tensor_addr = sym(c, "copy_tensor_addr");
  *(void **)&c->drop = sym(c, "copy_drop");
}

static struct copy A, B;
static int shared_mode;
static int absent_mode;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int readable(int fd, int timeout_ms) {
  struct pollfd p;
  p.fd = fd;
  p.events = POLLIN;
  p.revents = 0;
  int r = poll(&p, 1, timeout_ms);
  CHECK(r >= 0);
  return r == 1;
}

/* True while addr lies in a mapping of one of pinframe's memfds (read from /proc/self/maps,
 * so that an unrelated mapping placed at the freed address afterwards does not count). */
static int is_mapped(const void *addr) {
  FILE *f = fopen("/proc/self/maps", "r");
  CHECK(f != NULL);
  char line[1024];
  int found = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    unsigned long start = 0, end = 0;
    char path[512];
    path[0] = '\0';
    if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %511s", &start, &end, path) >= 2 &&
        (uintptr_t)addr >= start && (uintptr_t)addr < end &&
        strncmp(path, "/memfd:pinframe", 15) == 0)
      found = 1;
  }
  fclose(f);
  return found;
}

static void which_guard(void) {
  CHECK(A.guard_mode() == shared_mode && B.guard_mode() == shared_mode);
  if (shared_mode) {
    CHECK(A.guard_id() == B.guard_id()); /* one table: libpinframe.so.0's */
  } else {
    CHECK(A.guard_id() != B.guard_id()); /* each copy its own */
  }
}

struct hold {
  int entered[2];
  int release[2];
};

static void hold_cb(void *ctx) {
  struct hold *h = (struct hold *)ctx;
  char c = 'e';
  CHECK(write(h->entered[1], &c, 1) == 1);
  CHECK(read(h->release[0], &c, 1) == 1);
}

static void *hold_in_a(void *ctx) {
  A.excluded(hold_cb, ctx);
  return NULL;
}

struct map {
  int done[2];
  int result;
};

static void *map_in_b(void *ctx) {
  struct map *m = (struct map *)ctx;
  m->result = B.map_fresh();
  char c = 'm';
  CHECK(write(m->done[1], &c, 1) == 1);
  return NULL;
}

static void a_map_in_b_and_an_exclusive_section_in_a(void) {
  struct hold h;
  struct map m;
  CHECK(pipe(h.entered) == 0 && pipe(h.release) == 0 && pipe(m.done) == 0);
  m.result = -1;
  pthread_t holder, mapper;
  CHECK(pthread_create(&holder, NULL, hold_in_a, &h) == 0);
  char c;
  CHECK(read(h.entered[0], &c, 1) == 1); /* A's exclusive side is held */
  CHECK(pthread_create(&mapper, NULL, map_in_b, &m) == 0);
  if (shared_mode) {
    /* B's map waits on the one guard: A counts it among its waiters. */
    const double deadline = now_s() + 30.0;
    while (A.guard_waiters() < 1) {
      CHECK(now_s() < deadline);
      sched_yield();
    }
    CHECK(B.guard_waiters() >= 1);
    CHECK(!readable(m.done[0], 0)); /* not mapped while A excludes */
    c = 'r';
    CHECK(write(h.release[1], &c, 1) == 1);
    CHECK(pthread_join(holder, NULL) == 0);
    CHECK(readable(m.done[0], 30000)); /* mapped once A released */
  } else {
    /* Two guards: B maps while A still holds its exclusive side. */
    CHECK(readable(m.done[0], 30000));
    CHECK(A.guard_waiters() == 0);
    c = 'r';
    CHECK(write(h.release[1], &c, 1) == 1);
    CHECK(pthread_join(holder, NULL) == 0);
  }
  CHECK(read(m.done[0], &c, 1) == 1);
  CHECK(pthread_join(mapper, NULL) == 0);
  CHECK(m.result == 0);
  for (int i = 0; i < 2; i++) {
    close(h.entered[i]);
    close(h.release[i]);
    close(m.done[i]);
  }
}

static void map_in_b_inside(void *ctx) { *(int *)ctx = B.map_fresh(); }

static void b_on_the_thread_of_a_section_in_a(void) {
  int result = -1;
  A.excluded(map_in_b_inside, &result);
  /* shared: B knows this thread holds the exclusive side and refuses (1) instead of
   * waiting for itself; local: B has no idea and maps (0). */
  CHECK(result == (shared_mode ? 1 : 0));
}

struct drop_ctx {
  void *tensor;
  const void *addr;
  size_t live_before;
  int mapped_inside;
  size_t live_inside;
};

static void drop_in_b_inside(void *ctx) {
  struct drop_ctx *d = (struct drop_ctx *)ctx;
  B.drop(d->tensor);
  d->mapped_inside = is_mapped(d->addr);
  d->live_inside = B.live_mappings();
}

static void b_s_unmap_inside_a_section(void) {
  struct drop_ctx d;
  d.tensor = B.new_mapped();
  CHECK(d.tensor != NULL);
  d.addr = B.tensor_addr(d.tensor);
  CHECK(d.addr != NULL && is_mapped(d.addr));
  d.live_before = B.live_mappings();
  A.excluded(drop_in_b_inside, &d);
  if (shared_mode) {
    CHECK(d.mapped_inside == 1 && d.live_inside == d.live_before); /* deferred */
  } else {
    CHECK(d.mapped_inside == 0 && d.live_inside == d.live_before - 1); /* at once */
  }
  CHECK(!is_mapped(d.addr));
  CHECK(B.live_mappings() == d.live_before - 1);
}

#define RUN(test)                                                                      \
  do {                                                                                 \
    test();                                                                            \
    printf("test guard_copies::%s::%s ... ok\n", shared_mode ? "shared" : "local", #test); \
    fflush(stdout);                                                                    \
    check_passed++;                                                                    \
  } while (0)

/* Built for the shared guard, without the library that holds it: no silent local guard,
 * every mapping is refused with an error that names the library. */
static void without_libpinframe_copies_refuse_to_map(void) {
  CHECK(A.guard_mode() == -1 && B.guard_mode() == -1);
  CHECK(A.map_fresh() == 2 && B.map_fresh() == 2);
  CHECK(A.new_mapped() == NULL);
}

int main(int argc, char **argv) {
  if (argc != 4 || (strcmp(argv[1], "shared") != 0 && strcmp(argv[1], "local") != 0 &&
                    strcmp(argv[1], "absent") != 0)) {
    fprintf(stderr, "usage: %s shared|local|absent COPY_A.so COPY_B.so\n", argv[0]);
    return 2;
  }
  shared_mode = strcmp(argv[1], "shared") == 0;
  absent_mode = strcmp(argv[1], "absent") == 0;
  CHECK(strcmp(argv[2], argv[3]) != 0);
  load(&A, argv[2]);
  load(&B, argv[3]);
  if (absent_mode) {
    without_libpinframe_copies_refuse_to_map();
    printf("test guard_copies::absent::without_libpinframe_copies_refuse_to_map ... ok\n");
    printf("\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n\n");
    return 0;
  }
  RUN(which_guard);
  RUN(a_map_in_b_and_an_exclusive_section_in_a);
  RUN(b_on_the_thread_of_a_section_in_a);
  RUN(b_s_unmap_inside_a_section);
  printf("\ntest result: ok. %d passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n\n",
         check_passed);
  return 0;
}
