/* pinframe_with_cpu_mappings_excluded held from C while pinframe's Rust code maps:
 *   - a map() on another thread waits until the C section ends (ordered by pipes and by
 *     the guard's own count of waiting threads, no sleeps deciding the order);
 *   - on the section's own thread, a first mapping is a clear error (no self-deadlock),
 *     an existing mapping is usable, and a tensor (or pin) freed inside is unmapped only
 *     when the section ends.
 * Runs under valgrind in scripts/lanes/c. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static pinframe_tensor *shm_bytes(size_t n) {
  pinframe_tensor *t = NULL;
  OK(pinframe_tensor_create(PINFRAME_DTYPE_U8, &n, 1, PINFRAME_MEMORY_SHM, &t));
  return t;
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

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* True if fd has something to read within timeout_ms (a bound for failures only). */
static int readable(int fd, int timeout_ms) {
  struct pollfd p;
  p.fd = fd;
  p.events = POLLIN;
  p.revents = 0;
  int r = poll(&p, 1, timeout_ms);
  CHECK(r >= 0);
  return r == 1;
}

struct holder {
  int entered[2]; /* the section is held */
  int release[2]; /* end it */
};

static void hold(void *ctx) {
  struct holder *h = (struct holder *)ctx;
  char c = 'e';
  CHECK(write(h->entered[1], &c, 1) == 1);
  CHECK(read(h->release[0], &c, 1) == 1);
}

static void *holder_thread(void *ctx) {
  OK(pinframe_with_cpu_mappings_excluded(hold, ctx));
  return NULL;
}

struct mapper {
  pinframe_tensor *tensor;
  int mapped[2];
  pinframe_status status;
};

static void *mapper_thread(void *ctx) {
  struct mapper *m = (struct mapper *)ctx;
  void *data = NULL;
  size_t len = 0;
  m->status = pinframe_tensor_map(m->tensor, PINFRAME_ACCESS_READ, &data, &len);
  char c = 'm';
  CHECK(write(m->mapped[1], &c, 1) == 1);
  return NULL;
}

static void a_map_on_another_thread_waits_for_the_c_section(void) {
  const pinframe_guard_table *g = pinframe_get_guard_table();
  struct holder h;
  struct mapper m;
  CHECK(pipe(h.entered) == 0 && pipe(h.release) == 0 && pipe(m.mapped) == 0);
  m.tensor = shm_bytes(4096); /* never mapped: its first map() is an mmap */
  m.status = (pinframe_status)-1;

  pthread_t holder, mapper;
  CHECK(pthread_create(&holder, NULL, holder_thread, &h) == 0);
  char c;
  CHECK(read(h.entered[0], &c, 1) == 1); /* the C section is held */
  CHECK(g->excluded_now() == 1 && g->waiters() == 0);
  CHECK(pthread_create(&mapper, NULL, mapper_thread, &m) == 0);
  /* The mapper reaches the guard and waits on it. */
  const double deadline = now_s() + 30.0;
  while (g->waiters() < 1) {
    CHECK(now_s() < deadline);
    sched_yield();
  }
  CHECK(!readable(m.mapped[0], 0)); /* it has not mapped */
  c = 'r';
  CHECK(write(h.release[1], &c, 1) == 1);
  CHECK(pthread_join(holder, NULL) == 0);
  CHECK(readable(m.mapped[0], 30000)); /* now it does */
  CHECK(read(m.mapped[0], &c, 1) == 1);
  CHECK(pthread_join(mapper, NULL) == 0);
  CHECK(m.status == PINFRAME_OK);
  CHECK(g->waiters() == 0 && g->excluded_now() == 0);
  OK(pinframe_tensor_unmap(m.tensor));
  OK(pinframe_tensor_free(m.tensor));
  close(h.entered[0]);
  close(h.entered[1]);
  close(h.release[0]);
  close(h.release[1]);
  close(m.mapped[0]);
  close(m.mapped[1]);
}

struct inside {
  pinframe_tensor *fresh;  /* never mapped */
  pinframe_tensor *mapped; /* mapped (and unmapped) before the section */
  pinframe_tensor *doomed; /* freed inside the section */
  pinframe_pin *pin;       /* freed inside the section, its tensor freed before */
  void *doomed_addr;
  void *pin_addr;
  int checked;
};

static void nested(void *ctx) { *(int *)ctx += 1; }

static void inside_the_section(void *ctx) {
  struct inside *s = (struct inside *)ctx;
  const pinframe_guard_table *g = pinframe_get_guard_table();
  CHECK(g->thread_excludes() == 1);
  void *data = NULL;
  size_t len = 0;
  /* A first mapping here would wait for this very section: an error instead. */
  FAILS(pinframe_tensor_map(s->fresh, PINFRAME_ACCESS_READ, &data, &len),
        PINFRAME_ERROR_INVALID_INPUT, "inside with_cpu_mappings_excluded");
  pinframe_pin *pin = NULL;
  FAILS(pinframe_tensor_pin(s->fresh, &pin), PINFRAME_ERROR_INVALID_INPUT,
        "inside with_cpu_mappings_excluded");
  /* An existing mapping is fine. */
  OK(pinframe_tensor_map(s->mapped, PINFRAME_ACCESS_READ_WRITE, &data, &len));
  ((unsigned char *)data)[0] = 42;
  OK(pinframe_tensor_unmap(s->mapped));
  /* A nested section is fine. */
  int flag = 0;
  OK(pinframe_with_cpu_mappings_excluded(nested, &flag));
  CHECK(flag == 1 && g->thread_excludes() == 1);
  /* Freeing the last owners of mappings: unmapped when the section ends, not now. */
  OK(pinframe_tensor_free(s->doomed));
  OK(pinframe_pin_free(s->pin));
  CHECK(is_mapped(s->doomed_addr));
  CHECK(is_mapped(s->pin_addr));
  s->checked = 1;
}

static void outer(void *ctx) {
  OK(pinframe_with_cpu_mappings_excluded(nested, ctx));
  *(int *)ctx += 10;
}

static void the_section_s_own_thread_never_deadlocks(void) {
  struct inside s;
  s.fresh = shm_bytes(4096);
  s.mapped = shm_bytes(4096);
  void *data = NULL;
  size_t len = 0;
  OK(pinframe_tensor_map(s.mapped, PINFRAME_ACCESS_READ, &data, &len));
  OK(pinframe_tensor_unmap(s.mapped)); /* the mapping itself stays (made once, kept) */
  s.doomed = shm_bytes(8192);
  OK(pinframe_tensor_map(s.doomed, PINFRAME_ACCESS_READ, &s.doomed_addr, &len));
  OK(pinframe_tensor_unmap(s.doomed));
  pinframe_tensor *pinned = shm_bytes(4096);
  OK(pinframe_tensor_pin(pinned, &s.pin));
  size_t alignment = 0;
  OK(pinframe_pin_get_data(s.pin, &s.pin_addr, &len, &alignment));
  OK(pinframe_tensor_free(pinned)); /* the pin is now the buffer's last owner */
  s.checked = 0;

  OK(pinframe_with_cpu_mappings_excluded(inside_the_section, &s));
  CHECK(s.checked == 1);
  CHECK(!is_mapped(s.doomed_addr)); /* unmapped as the section ended */
  CHECK(!is_mapped(s.pin_addr));
  OK(pinframe_tensor_map(s.fresh, PINFRAME_ACCESS_READ, &data, &len)); /* fine outside */
  OK(pinframe_tensor_map(s.mapped, PINFRAME_ACCESS_READ, &data, &len));
  CHECK(((unsigned char *)data)[0] == 42);
  OK(pinframe_tensor_free(s.fresh));
  OK(pinframe_tensor_free(s.mapped));

  int count = 0;
  OK(pinframe_with_cpu_mappings_excluded(outer, &count));
  CHECK(count == 11);
}

int main(void) {
  RUN(a_map_on_another_thread_waits_for_the_c_section);
  RUN(the_section_s_own_thread_never_deadlocks);
  SUMMARY();
  return 0;
}
