/* Every entry point of pinframe.h, from C: what it does, and each of its error paths
 * (NULL arguments, bad fds, bad layouts, unsupported pairs, misuse) returning the
 * documented status and a message that says what was wrong. Built as C99 and as C++17
 * by scripts/lanes/c, which also checks that every function of the header is named here.
 *
 *   api            run everything (GL needs EGL_PLATFORM=surfaceless and Mesa here)
 *   api TEST       run the one test function named TEST */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static pinframe_tensor *shm_bytes(size_t n) {
  pinframe_tensor *t = NULL;
  OK(pinframe_tensor_create(PINFRAME_DTYPE_U8, &n, 1, PINFRAME_MEMORY_SHM, &t));
  return t;
}

static pinframe_layout layout_of(uint32_t w, uint32_t h, pinframe_format f, pinframe_dtype d) {
  pinframe_layout l;
  l.struct_size = sizeof l;
  OK(pinframe_layout_init(&l, w, h, f, d, 1));
  return l;
}

/* ---- version, info, status names, last error ---- */

static void version_and_info(void) {
  char expect[32];
  snprintf(expect, sizeof expect, "%d.%d.%d", PINFRAME_VERSION_MAJOR, PINFRAME_VERSION_MINOR,
           PINFRAME_VERSION_PATCH);
  CHECK(strcmp(pinframe_version(), expect) == 0);

  pinframe_info info;
  memset(&info, 0xAB, sizeof info);
  info.struct_size = sizeof info;
  OK(pinframe_get_info(&info));
  CHECK(info.version_major == PINFRAME_VERSION_MAJOR);
  CHECK(info.version_minor == PINFRAME_VERSION_MINOR);
  CHECK(info.guard_abi_version == PINFRAME_GUARD_ABI_VERSION);
  CHECK((info.features & PINFRAME_FEATURE_GL) && (info.features & PINFRAME_FEATURE_CAMERA));
  NULL_ARG(pinframe_get_info(NULL), "info");
  info.struct_size = 0;
  FAILS(pinframe_get_info(&info), PINFRAME_ERROR_INVALID_INPUT, "struct_size");

  /* A size no released header gave pinframe_info: refused, nothing written. */
  unsigned char small[sizeof(size_t) + 4 + 4];
  memset(small, 0xEE, sizeof small);
  size_t size = sizeof(size_t) + 4;
  memcpy(small, &size, sizeof size);
  FAILS(pinframe_get_info((pinframe_info *)(void *)small), PINFRAME_ERROR_INVALID_INPUT,
        "struct_size 12 is not a size of pinframe_info");
  CHECK(small[sizeof(size_t)] == 0xEE && small[sizeof small - 1] == 0xEE);

  size_t length = 0;
  OK(pinframe_info_string(NULL, 0, &length));
  CHECK(length > 20);
  char *text = (char *)malloc(length + 1);
  size_t again = 0;
  OK(pinframe_info_string(text, length + 1, &again));
  CHECK(again == length && strlen(text) == length);
  CHECK(strstr(text, "pinframe ") == text);
  CHECK(strstr(text, "cpu-mapping guard") != NULL);
  char shortbuf[8];
  OK(pinframe_info_string(shortbuf, sizeof shortbuf, &again));
  CHECK(again == length && strlen(shortbuf) == sizeof shortbuf - 1);
  CHECK(strncmp(shortbuf, text, sizeof shortbuf - 1) == 0);
  free(text);
  NULL_ARG(pinframe_info_string(shortbuf, sizeof shortbuf, NULL), "length");
  NULL_ARG(pinframe_info_string(NULL, 4, &again), "buffer");
}

static void status_names_and_last_error(void) {
  CHECK(strcmp(pinframe_status_name(PINFRAME_OK), "ok") == 0);
  CHECK(strcmp(pinframe_status_name(PINFRAME_ERROR_INVALID_INPUT), "invalid input") == 0);
  CHECK(strcmp(pinframe_status_name(PINFRAME_ERROR_TIMEOUT), "timeout") == 0);
  CHECK(strcmp(pinframe_status_name(PINFRAME_ERROR_ALL_BUFFERS_HELD), "all buffers held") == 0);
  CHECK(strcmp(pinframe_status_name(PINFRAME_ERROR_NULL_POINTER), "null pointer") == 0);
  CHECK(strcmp(pinframe_status_name(PINFRAME_ERROR_PANIC), "internal error (panic)") == 0);
  CHECK(strcmp(pinframe_status_name(99), "not a pinframe status") == 0);
  CHECK(strcmp(pinframe_status_name(-3), "not a pinframe status") == 0);

  /* A failure leaves its message; the next successful call clears it. */
  CHECK(pinframe_tensor_free(NULL) == PINFRAME_OK);
  CHECK(pinframe_last_error()[0] == '\0');
  CHECK(pinframe_get_info(NULL) == PINFRAME_ERROR_NULL_POINTER);
  const char *message = pinframe_last_error();
  CHECK(strstr(message, "`info`") != NULL);
  CHECK(pinframe_last_error() == message); /* stable until the next call */
  OK(pinframe_tensor_free(NULL));
  CHECK(pinframe_last_error()[0] == '\0');
}

static void format_names(void) {
  for (pinframe_format f = PINFRAME_FORMAT_YUYV; f <= PINFRAME_FORMAT_MJPEG; f++) {
    const char *name = pinframe_format_name(f);
    CHECK(name != NULL);
    pinframe_format back = 0;
    OK(pinframe_format_from_name(name, &back));
    CHECK(back == f);
  }
  CHECK(strcmp(pinframe_format_name(PINFRAME_FORMAT_NV12), "nv12") == 0);
  CHECK(strcmp(pinframe_format_name(PINFRAME_FORMAT_PLANAR_RGB), "planar-rgb") == 0);
  CHECK(pinframe_format_name(0) == NULL);
  /* The RAW codes came after the first 17 and keep their numbers for the ABI's life. */
  CHECK(PINFRAME_FORMAT_RGGB8 == 18 && PINFRAME_FORMAT_GBRG12P == 41 && PINFRAME_FORMAT_P016 == 47);
  CHECK(PINFRAME_FORMAT_I422 == 48 && PINFRAME_FORMAT_I444 == 49 && PINFRAME_FORMAT_MJPEG == 50);
  CHECK(strcmp(pinframe_format_name(PINFRAME_FORMAT_MJPEG), "mjpeg") == 0);
  CHECK(strcmp(pinframe_format_name(PINFRAME_FORMAT_RGGB8), "rggb8") == 0);
  CHECK(strcmp(pinframe_format_name(PINFRAME_FORMAT_BGGR10), "bggr10") == 0);
  CHECK(strcmp(pinframe_format_name(PINFRAME_FORMAT_GBRG12P), "gbrg12p") == 0);
  CHECK(strcmp(pinframe_format_name(PINFRAME_FORMAT_Y16), "y16") == 0);
  CHECK(strcmp(pinframe_format_name(PINFRAME_FORMAT_P010), "p010") == 0);
  CHECK(pinframe_format_name(51) == NULL);
  pinframe_format f = 0;
  OK(pinframe_format_from_name("NV12", &f));
  CHECK(f == PINFRAME_FORMAT_NV12);
  OK(pinframe_format_from_name("grbg12", &f));
  CHECK(f == PINFRAME_FORMAT_GRBG12);
  OK(pinframe_format_from_name("MJPG", &f));
  CHECK(f == PINFRAME_FORMAT_MJPEG);
  FAILS(pinframe_format_from_name("h264", &f), PINFRAME_ERROR_INVALID_INPUT, "h264");
  NULL_ARG(pinframe_format_from_name(NULL, &f), "name");
  NULL_ARG(pinframe_format_from_name("rgb", NULL), "format");
}

/* ---- tensors ---- */

static void tensor_create_and_info(void) {
  size_t shape[3] = {2, 3, 4};
  pinframe_tensor *t = NULL;
  OK(pinframe_tensor_create(PINFRAME_DTYPE_F32, shape, 3, PINFRAME_MEMORY_HEAP, &t));
  pinframe_tensor_info info;
  info.struct_size = sizeof info;
  OK(pinframe_tensor_get_info(t, &info));
  CHECK(info.dtype == PINFRAME_DTYPE_F32 && info.memory == PINFRAME_MEMORY_HEAP);
  CHECK(info.ndim == 3 && info.shape[0] == 2 && info.shape[1] == 3 && info.shape[2] == 4);
  CHECK(info.buffer_count == 1 && info.buffer_len[0] == 2 * 3 * 4 * sizeof(float));
  CHECK(info.has_layout == 0 && info.is_frame == 0);
  NULL_ARG(pinframe_tensor_get_info(NULL, &info), "tensor");
  NULL_ARG(pinframe_tensor_get_info(t, NULL), "info");
  pinframe_layout l;
  l.struct_size = sizeof l;
  FAILS(pinframe_tensor_get_layout(t, &l), PINFRAME_ERROR_INVALID_INPUT, "no image layout");
  OK(pinframe_tensor_free(t));

  for (pinframe_dtype d = PINFRAME_DTYPE_U8; d <= PINFRAME_DTYPE_F64; d++) {
    size_t n = 16;
    OK(pinframe_tensor_create(d, &n, 1, PINFRAME_MEMORY_AUTO, &t));
    OK(pinframe_tensor_get_info(t, &info));
    CHECK(info.dtype == d);
    CHECK(info.memory == PINFRAME_MEMORY_SHM); /* AUTO never spends DMA memory */
    OK(pinframe_tensor_free(t));
    OK(pinframe_tensor_create(d, &n, 1, PINFRAME_MEMORY_DEVICE, &t));
    OK(pinframe_tensor_get_info(t, &info));
    CHECK(info.memory == PINFRAME_MEMORY_DMA || info.memory == PINFRAME_MEMORY_SHM);
    OK(pinframe_tensor_free(t));
  }

  t = (pinframe_tensor *)(void *)&info; /* must be reset to NULL on failure */
  NULL_ARG(pinframe_tensor_create(PINFRAME_DTYPE_U8, NULL, 1, PINFRAME_MEMORY_HEAP, &t), "shape");
  CHECK(t == NULL);
  NULL_ARG(pinframe_tensor_create(PINFRAME_DTYPE_U8, shape, 1, PINFRAME_MEMORY_HEAP, NULL), "out");
  FAILS(pinframe_tensor_create(PINFRAME_DTYPE_U8, shape, 0, PINFRAME_MEMORY_HEAP, &t),
        PINFRAME_ERROR_INVALID_INPUT, "ndim 0");
  size_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  FAILS(pinframe_tensor_create(PINFRAME_DTYPE_U8, nine, 9, PINFRAME_MEMORY_HEAP, &t),
        PINFRAME_ERROR_INVALID_INPUT, "ndim 9");
  size_t zero[2] = {4, 0};
  FAILS(pinframe_tensor_create(PINFRAME_DTYPE_U8, zero, 2, PINFRAME_MEMORY_HEAP, &t),
        PINFRAME_ERROR_INVALID_INPUT, "zero dimension");
  FAILS(pinframe_tensor_create(42, shape, 1, PINFRAME_MEMORY_HEAP, &t),
        PINFRAME_ERROR_INVALID_INPUT, "unknown dtype 42");
  FAILS(pinframe_tensor_create(PINFRAME_DTYPE_U8, shape, 1, 17, &t),
        PINFRAME_ERROR_INVALID_INPUT, "unknown memory kind 17");
  CHECK(t == NULL);
}

static void tensor_image_and_layouts(void) {
  pinframe_tensor *t = NULL;
  OK(pinframe_tensor_image(33, 17, PINFRAME_FORMAT_NV12, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_SHM,
                           &t));
  pinframe_layout l;
  l.struct_size = sizeof l;
  OK(pinframe_tensor_get_layout(t, &l));
  CHECK(l.width == 33 && l.height == 17 && l.format == PINFRAME_FORMAT_NV12);
  CHECK(l.plane_count == 2 && l.planes[0].stride == 33 && l.planes[1].offset == 33 * 17);
  CHECK(l.planes[1].stride == 34); /* odd width: 17 chroma pairs */
  NULL_ARG(pinframe_tensor_get_layout(NULL, &l), "tensor");
  NULL_ARG(pinframe_tensor_get_layout(t, NULL), "layout");
  OK(pinframe_tensor_free(t));

  FAILS(pinframe_tensor_image(8, 8, 99, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_HEAP, &t),
        PINFRAME_ERROR_INVALID_INPUT, "unknown pixel format 99");
  FAILS(pinframe_tensor_image(8, 8, PINFRAME_FORMAT_YUYV, PINFRAME_DTYPE_F32,
                              PINFRAME_MEMORY_HEAP, &t),
        PINFRAME_ERROR_INVALID_INPUT, "yuyv is a source format of bytes");
  FAILS(pinframe_tensor_image(0, 8, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_HEAP,
                              &t),
        PINFRAME_ERROR_INVALID_INPUT, "empty");
  NULL_ARG(pinframe_tensor_image(8, 8, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8,
                                 PINFRAME_MEMORY_HEAP, NULL),
           "out");

  /* layout_init: tight and row-aligned. */
  l = layout_of(10, 4, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8);
  CHECK(l.planes[0].stride == 30);
  OK(pinframe_layout_init(&l, 10, 4, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8, 64));
  CHECK(l.planes[0].stride == 64);
  FAILS(pinframe_layout_init(&l, 10, 4, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8, 3),
        PINFRAME_ERROR_INVALID_INPUT, "not a power of two");
  NULL_ARG(pinframe_layout_init(NULL, 10, 4, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8, 1), "layout");

  /* with_layout: a padded stride is kept; malformed layouts are refused. */
  l = layout_of(10, 4, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8);
  l.planes[0].stride = 48;
  OK(pinframe_tensor_with_layout(&l, PINFRAME_MEMORY_HEAP, &t));
  pinframe_layout got;
  got.struct_size = sizeof got;
  OK(pinframe_tensor_get_layout(t, &got));
  CHECK(got.planes[0].stride == 48);
  pinframe_tensor_info info;
  info.struct_size = sizeof info;
  OK(pinframe_tensor_get_info(t, &info));
  CHECK(info.has_layout == 1 && info.buffer_len[0] >= 48 * 3 + 30);
  OK(pinframe_tensor_free(t));

  l.planes[0].stride = 29;
  FAILS(pinframe_tensor_with_layout(&l, PINFRAME_MEMORY_HEAP, &t), PINFRAME_ERROR_INVALID_INPUT,
        "stride 29 is less than the 30 bytes");
  l = layout_of(10, 4, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8);
  l.plane_count = 4;
  FAILS(pinframe_tensor_with_layout(&l, PINFRAME_MEMORY_HEAP, &t), PINFRAME_ERROR_INVALID_INPUT,
        "plane_count 4");
  l = layout_of(8, 8, PINFRAME_FORMAT_NV12, PINFRAME_DTYPE_U8);
  l.planes[1].offset = 8; /* chroma over luma */
  FAILS(pinframe_tensor_with_layout(&l, PINFRAME_MEMORY_HEAP, &t), PINFRAME_ERROR_INVALID_INPUT,
        "overlap");
  l = layout_of(8, 8, PINFRAME_FORMAT_NV12, PINFRAME_DTYPE_U8);
  l.matrix = PINFRAME_MATRIX_BT709; /* range missing */
  FAILS(pinframe_tensor_with_layout(&l, PINFRAME_MEMORY_HEAP, &t), PINFRAME_ERROR_INVALID_INPUT,
        "both matrix and range");
  l.struct_size = 0;
  FAILS(pinframe_tensor_with_layout(&l, PINFRAME_MEMORY_HEAP, &t), PINFRAME_ERROR_INVALID_INPUT,
        "struct_size 0");
  NULL_ARG(pinframe_tensor_with_layout(NULL, PINFRAME_MEMORY_HEAP, &t), "layout");
  l = layout_of(8, 8, PINFRAME_FORMAT_NV12, PINFRAME_DTYPE_U8);
  NULL_ARG(pinframe_tensor_with_layout(&l, PINFRAME_MEMORY_HEAP, NULL), "out");
}

static void set_layout_addresses_a_tile(void) {
  size_t shape[4] = {2, 3, 4, 4}; /* a batch of two 4x4 planar RGB u8 images */
  pinframe_tensor *t = NULL;
  OK(pinframe_tensor_create(PINFRAME_DTYPE_U8, shape, 4, PINFRAME_MEMORY_HEAP, &t));
  pinframe_layout l = layout_of(4, 4, PINFRAME_FORMAT_PLANAR_RGB, PINFRAME_DTYPE_U8);
  for (int p = 0; p < 3; p++) l.planes[p].offset += 48; /* the second image */
  OK(pinframe_tensor_set_layout(t, &l));
  pinframe_layout got;
  got.struct_size = sizeof got;
  OK(pinframe_tensor_get_layout(t, &got));
  CHECK(got.planes[0].offset == 48 && got.planes[2].offset == 48 + 32);
  pinframe_tensor_info info;
  info.struct_size = sizeof info;
  OK(pinframe_tensor_get_info(t, &info));
  CHECK(info.ndim == 4 && info.shape[0] == 2); /* the shape is unchanged */

  l.planes[2].offset = 96; /* past the end */
  FAILS(pinframe_tensor_set_layout(t, &l), PINFRAME_ERROR_INVALID_INPUT, "buffer too small");
  pinframe_layout f32 = layout_of(4, 4, PINFRAME_FORMAT_PLANAR_RGB, PINFRAME_DTYPE_F32);
  FAILS(pinframe_tensor_set_layout(t, &f32), PINFRAME_ERROR_INVALID_INPUT, "f32 elements");
  void *data = NULL;
  size_t len = 0;
  OK(pinframe_tensor_map(t, PINFRAME_ACCESS_READ, &data, &len));
  l = layout_of(4, 4, PINFRAME_FORMAT_PLANAR_RGB, PINFRAME_DTYPE_U8);
  FAILS(pinframe_tensor_set_layout(t, &l), PINFRAME_ERROR_INVALID_INPUT, "unmap first");
  OK(pinframe_tensor_unmap(t));
  NULL_ARG(pinframe_tensor_set_layout(NULL, &l), "tensor");
  NULL_ARG(pinframe_tensor_set_layout(t, NULL), "layout");
  OK(pinframe_tensor_free(t));
}

static void map_unmap_and_mapped_buffers(void) {
  pinframe_tensor *t = shm_bytes(4096);
  void *data = NULL;
  size_t len = 0;
  OK(pinframe_tensor_map(t, PINFRAME_ACCESS_WRITE, &data, &len));
  CHECK(data != NULL && len == 4096);
  memset(data, 0x5A, len);
  void *again = NULL;
  size_t again_len = 0;
  OK(pinframe_tensor_get_mapped_buffer(t, 0, &again, &again_len));
  CHECK(again == data && again_len == len);
  FAILS(pinframe_tensor_get_mapped_buffer(t, 1, &again, &again_len),
        PINFRAME_ERROR_INVALID_INPUT, "buffer 1 does not exist");
  FAILS(pinframe_tensor_map(t, PINFRAME_ACCESS_READ, &again, &again_len),
        PINFRAME_ERROR_INVALID_INPUT, "already mapped");
  /* Mapped for writing: the tensor refuses what would read it behind the writer's back. */
  FAILS(pinframe_tensor_sync_for_cpu(t, PINFRAME_ACCESS_READ), PINFRAME_ERROR_INVALID_INPUT,
        "mapped for writing");
  pinframe_pin *pin = NULL;
  FAILS(pinframe_tensor_pin(t, &pin), PINFRAME_ERROR_INVALID_INPUT, "mapped for writing");
  pinframe_tensor_info info; /* ... but describing it is fine */
  info.struct_size = sizeof info;
  OK(pinframe_tensor_get_info(t, &info));
  OK(pinframe_tensor_unmap(t));
  FAILS(pinframe_tensor_unmap(t), PINFRAME_ERROR_INVALID_INPUT, "not mapped");
  FAILS(pinframe_tensor_get_mapped_buffer(t, 0, &again, &again_len),
        PINFRAME_ERROR_INVALID_INPUT, "not mapped");

  OK(pinframe_tensor_map(t, PINFRAME_ACCESS_READ, &data, &len));
  CHECK(((unsigned char *)data)[4095] == 0x5A);
  OK(pinframe_tensor_sync_for_cpu(t, PINFRAME_ACCESS_READ)); /* reading alongside is fine */
  OK(pinframe_tensor_unmap(t));

  FAILS(pinframe_tensor_map(t, 9, &data, &len), PINFRAME_ERROR_INVALID_INPUT, "unknown access 9");
  NULL_ARG(pinframe_tensor_map(NULL, PINFRAME_ACCESS_READ, &data, &len), "tensor");
  NULL_ARG(pinframe_tensor_map(t, PINFRAME_ACCESS_READ, NULL, &len), "data");
  NULL_ARG(pinframe_tensor_map(t, PINFRAME_ACCESS_READ, &data, NULL), "len");
  NULL_ARG(pinframe_tensor_get_mapped_buffer(NULL, 0, &data, &len), "tensor");
  NULL_ARG(pinframe_tensor_get_mapped_buffer(t, 0, NULL, &len), "data");
  NULL_ARG(pinframe_tensor_get_mapped_buffer(t, 0, &data, NULL), "len");
  NULL_ARG(pinframe_tensor_unmap(NULL), "tensor");

  /* Freeing a mapped tensor ends the mapping. */
  OK(pinframe_tensor_map(t, PINFRAME_ACCESS_READ_WRITE, &data, &len));
  OK(pinframe_tensor_free(t));
}

static void fds_and_imports(void) {
  pinframe_tensor *a = NULL;
  OK(pinframe_tensor_image(16, 8, PINFRAME_FORMAT_RGBA, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_SHM,
                           &a));
  int fd = -1;
  OK(pinframe_tensor_get_fd(a, 0, &fd));
  CHECK(fd >= 0);
  struct stat st;
  CHECK(fstat(fd, &st) == 0 && st.st_size >= 16 * 8 * 4);
  void *data = NULL;
  size_t len = 0;
  OK(pinframe_tensor_map(a, PINFRAME_ACCESS_WRITE, &data, &len));
  ((unsigned char *)data)[100] = 123;
  OK(pinframe_tensor_unmap(a));

  /* Import the same memfd: a second tensor over the same bytes (the fd is duplicated). */
  pinframe_layout l = layout_of(16, 8, PINFRAME_FORMAT_RGBA, PINFRAME_DTYPE_U8);
  pinframe_tensor *b = NULL;
  OK(pinframe_tensor_import(fd, &l, &b));
  OK(pinframe_tensor_map(b, PINFRAME_ACCESS_READ, &data, &len));
  CHECK(((unsigned char *)data)[100] == 123);
  OK(pinframe_tensor_unmap(b));
  int fd_b = -1;
  OK(pinframe_tensor_get_fd(b, 0, &fd_b));
  CHECK(fd_b >= 0 && fd_b != fd);
  FAILS(pinframe_tensor_get_fd(b, 1, &fd_b), PINFRAME_ERROR_INVALID_INPUT, "buffer 1");
  NULL_ARG(pinframe_tensor_get_fd(NULL, 0, &fd_b), "tensor");
  NULL_ARG(pinframe_tensor_get_fd(b, 0, NULL), "fd");
  OK(pinframe_tensor_free(b));
  CHECK(fcntl(fd, F_GETFD) != -1); /* the tensor's own fd is untouched */

  /* A read-only fd imports read-only: writing mappings are refused. */
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  int ro = open(path, O_RDONLY | O_CLOEXEC);
  CHECK(ro >= 0);
  OK(pinframe_tensor_import(ro, &l, &b));
  FAILS(pinframe_tensor_map(b, PINFRAME_ACCESS_WRITE, &data, &len), PINFRAME_ERROR_INVALID_INPUT,
        "read-only");
  OK(pinframe_tensor_map(b, PINFRAME_ACCESS_READ, &data, &len));
  CHECK(((unsigned char *)data)[100] == 123);
  OK(pinframe_tensor_free(b));
  close(ro);

  /* Bad fds. */
  FAILS(pinframe_tensor_import(-1, &l, &b), PINFRAME_ERROR_INVALID_INPUT,
        "fd -1 is not a file descriptor");
  CHECK(b == NULL);
  int closed = dup(fd);
  close(closed);
  FAILS(pinframe_tensor_import(closed, &l, &b), PINFRAME_ERROR_INVALID_INPUT, "is not open");
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  FAILS(pinframe_tensor_import(devnull, &l, &b), PINFRAME_ERROR_INVALID_INPUT,
        "neither a dma-buf nor a memfd");
  close(devnull);
  /* Too small and unsealed: the seal is checked first (the size of a memfd that can
   * still shrink means nothing), with or without MFD_ALLOW_SEALING. */
  int tiny = memfd_create("pinframe-api-test", MFD_CLOEXEC);
  CHECK(tiny >= 0 && ftruncate(tiny, 100) == 0);
  FAILS(pinframe_tensor_import(tiny, &l, &b), PINFRAME_ERROR_IMPORT_REFUSED,
        "has no F_SEAL_SHRINK seal");
  FAILS(pinframe_tensor_import(tiny, &l, &b), PINFRAME_ERROR_IMPORT_REFUSED,
        "created without MFD_ALLOW_SEALING");
  close(tiny);
  tiny = memfd_create("pinframe-api-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  CHECK(tiny >= 0 && ftruncate(tiny, 100) == 0);
  FAILS(pinframe_tensor_import(tiny, &l, &b), PINFRAME_ERROR_IMPORT_REFUSED,
        "has no F_SEAL_SHRINK seal");
  /* Sealed, then its size is what is wrong. */
  CHECK(fcntl(tiny, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
  FAILS(pinframe_tensor_import(tiny, &l, &b), PINFRAME_ERROR_INVALID_INPUT, "buffer too small");
  close(tiny);
  /* A memfd that can still shrink is refused (a truncation would SIGBUS the mapping). */
  int unsealed = memfd_create("pinframe-api-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  CHECK(unsealed >= 0 && ftruncate(unsealed, 16 * 8 * 4) == 0);
  FAILS(pinframe_tensor_import(unsealed, &l, &b), PINFRAME_ERROR_IMPORT_REFUSED, "F_SEAL_SHRINK");
  CHECK(fcntl(unsealed, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
  OK(pinframe_tensor_import(unsealed, &l, &b));
  OK(pinframe_tensor_free(b));
  close(unsealed);
  /* Bad layout. */
  pinframe_layout bad = l;
  bad.planes[0].stride = 10;
  FAILS(pinframe_tensor_import(fd, &bad, &b), PINFRAME_ERROR_INVALID_INPUT, "stride 10");
  NULL_ARG(pinframe_tensor_import(fd, NULL, &b), "layout");
  NULL_ARG(pinframe_tensor_import(fd, &l, NULL), "out");

  /* A heap tensor has no fd. */
  pinframe_tensor *h = NULL;
  size_t n = 64;
  OK(pinframe_tensor_create(PINFRAME_DTYPE_U8, &n, 1, PINFRAME_MEMORY_HEAP, &h));
  FAILS(pinframe_tensor_get_fd(h, 0, &fd_b), PINFRAME_ERROR_UNSUPPORTED, "heap tensor has no fd");
  OK(pinframe_tensor_free(h));
  OK(pinframe_tensor_free(a));
}

static void import_planes_of_two_fds(void) {
  /* NV12 with luma and chroma in two memfds (V4L2's NV12M). */
  pinframe_tensor *y = shm_bytes(8 * 4), *uv = shm_bytes(8 * 2);
  int fds[2];
  OK(pinframe_tensor_get_fd(y, 0, &fds[0]));
  OK(pinframe_tensor_get_fd(uv, 0, &fds[1]));
  void *data = NULL;
  size_t len = 0;
  OK(pinframe_tensor_map(uv, PINFRAME_ACCESS_WRITE, &data, &len));
  memset(data, 77, len);
  OK(pinframe_tensor_unmap(uv));
  pinframe_layout l = layout_of(8, 4, PINFRAME_FORMAT_NV12, PINFRAME_DTYPE_U8);
  l.planes[1].buffer = 1;
  l.planes[1].offset = 0;
  pinframe_tensor *t = NULL;
  OK(pinframe_tensor_import_planes(fds, 2, &l, &t));
  pinframe_tensor_info info;
  info.struct_size = sizeof info;
  OK(pinframe_tensor_get_info(t, &info));
  CHECK(info.buffer_count == 2);
  OK(pinframe_tensor_map(t, PINFRAME_ACCESS_READ, &data, &len));
  OK(pinframe_tensor_get_mapped_buffer(t, 1, &data, &len));
  CHECK(len == 16 && ((unsigned char *)data)[15] == 77);
  OK(pinframe_tensor_unmap(t));
  pinframe_pin *pin = NULL;
  FAILS(pinframe_tensor_pin(t, &pin), PINFRAME_ERROR_UNSUPPORTED, "single-buffer");
  OK(pinframe_tensor_free(t));

  FAILS(pinframe_tensor_import_planes(fds, 1, &l, &t), PINFRAME_ERROR_INVALID_INPUT,
        "1 fd(s) given");
  FAILS(pinframe_tensor_import_planes(fds, 0, &l, &t), PINFRAME_ERROR_INVALID_INPUT, "0 fds");
  NULL_ARG(pinframe_tensor_import_planes(NULL, 2, &l, &t), "fds");
  NULL_ARG(pinframe_tensor_import_planes(fds, 2, NULL, &t), "layout");
  NULL_ARG(pinframe_tensor_import_planes(fds, 2, &l, NULL), "out");
  OK(pinframe_tensor_free(y));
  OK(pinframe_tensor_free(uv));
}

static void pins_outlive_their_tensor(void) {
  pinframe_tensor *t = NULL;
  OK(pinframe_tensor_image(8, 2, PINFRAME_FORMAT_GREY, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_SHM, &t));
  pinframe_pin *pin = NULL;
  OK(pinframe_tensor_pin(t, &pin));
  void *address = NULL;
  size_t len = 0, alignment = 0;
  OK(pinframe_pin_get_data(pin, &address, &len, &alignment));
  CHECK(len == 16 && alignment >= 4096);
  OK(pinframe_tensor_sync_for_cpu(t, PINFRAME_ACCESS_WRITE));
  memset(address, 9, len);
  OK(pinframe_tensor_sync_for_device(t, PINFRAME_ACCESS_WRITE));
  void *data = NULL;
  size_t mapped = 0;
  OK(pinframe_tensor_map(t, PINFRAME_ACCESS_READ, &data, &mapped));
  CHECK(data == address && ((unsigned char *)data)[15] == 9);
  OK(pinframe_tensor_free(t)); /* the pin keeps the buffer */
  CHECK(((unsigned char *)address)[15] == 9);
  ((unsigned char *)address)[0] = 1;
  NULL_ARG(pinframe_pin_get_data(NULL, &address, &len, &alignment), "pin");
  NULL_ARG(pinframe_pin_get_data(pin, NULL, &len, &alignment), "address");
  NULL_ARG(pinframe_pin_get_data(pin, &address, NULL, &alignment), "len");
  NULL_ARG(pinframe_pin_get_data(pin, &address, &len, NULL), "alignment");
  OK(pinframe_pin_free(pin));
  OK(pinframe_pin_free(NULL));

  OK(pinframe_tensor_image(8, 2, PINFRAME_FORMAT_GREY, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_SHM, &t));
  NULL_ARG(pinframe_tensor_pin(NULL, &pin), "tensor");
  NULL_ARG(pinframe_tensor_pin(t, NULL), "out");
  FAILS(pinframe_tensor_sync_for_cpu(t, 0), PINFRAME_ERROR_INVALID_INPUT, "unknown access 0");
  FAILS(pinframe_tensor_sync_for_device(t, 4), PINFRAME_ERROR_INVALID_INPUT, "unknown access 4");
  NULL_ARG(pinframe_tensor_sync_for_cpu(NULL, PINFRAME_ACCESS_READ), "tensor");
  NULL_ARG(pinframe_tensor_sync_for_device(NULL, PINFRAME_ACCESS_READ), "tensor");
  OK(pinframe_tensor_free(t));
}

/* ---- the processor ---- */

/* A w x h RGB u8 heap image whose pixel (x, y) is (x, y, x + y). */
static pinframe_tensor *gradient(uint32_t w, uint32_t h) {
  pinframe_tensor *t = NULL;
  OK(pinframe_tensor_image(w, h, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_HEAP, &t));
  void *data = NULL;
  size_t len = 0;
  OK(pinframe_tensor_map(t, PINFRAME_ACCESS_WRITE, &data, &len));
  unsigned char *p = (unsigned char *)data;
  for (uint32_t y = 0; y < h; y++)
    for (uint32_t x = 0; x < w; x++) {
      p[3 * (y * w + x) + 0] = (unsigned char)x;
      p[3 * (y * w + x) + 1] = (unsigned char)y;
      p[3 * (y * w + x) + 2] = (unsigned char)(x + y);
    }
  OK(pinframe_tensor_unmap(t));
  return t;
}

static unsigned char pixel(const pinframe_tensor *t, uint32_t w, uint32_t x, uint32_t y, int c) {
  void *data = NULL;
  size_t len = 0;
  OK(pinframe_tensor_map(t, PINFRAME_ACCESS_READ, &data, &len));
  unsigned char v = ((unsigned char *)data)[3 * (y * w + x) + c];
  OK(pinframe_tensor_unmap(t));
  return v;
}

static void convert_options_do_what_they_say(pinframe_processor *proc) {
  pinframe_tensor *src = gradient(8, 4);
  pinframe_tensor *dst = NULL;
  OK(pinframe_tensor_image(8, 4, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_HEAP, &dst));
  pinframe_convert_info info;
  info.struct_size = sizeof info;
  OK(pinframe_processor_convert(proc, src, dst, NULL, &info));
  CHECK(pixel(dst, 8, 5, 2, 0) == 5 && pixel(dst, 8, 5, 2, 1) == 2 && pixel(dst, 8, 5, 2, 2) == 7);
  CHECK(info.scale[0] == 1.0 && info.content[2] == 8 && info.content[3] == 4);
  CHECK(info.matrix == PINFRAME_MATRIX_AUTO); /* RGB source: no colorimetry */

  pinframe_convert_options o;
  o.struct_size = sizeof o;
  OK(pinframe_convert_options_init(&o));
  CHECK(o.mean[0] == 0.0f && o.std[2] == 1.0f && o.fit == PINFRAME_FIT_STRETCH);
  o.flip = PINFRAME_FLIP_HORIZONTAL;
  OK(pinframe_processor_convert(proc, src, dst, &o, NULL));
  CHECK(pixel(dst, 8, 0, 1, 0) == 7 && pixel(dst, 8, 7, 1, 0) == 0);

  OK(pinframe_convert_options_init(&o));
  o.has_crop = 1;
  o.crop.x = 2;
  o.crop.y = 1;
  o.crop.width = 4;
  o.crop.height = 2;
  o.interpolation = PINFRAME_INTERPOLATION_NEAREST;
  pinframe_tensor *small = NULL;
  OK(pinframe_tensor_image(4, 2, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_HEAP,
                           &small));
  OK(pinframe_processor_convert(proc, src, small, &o, &info));
  CHECK(pixel(small, 4, 0, 0, 0) == 2 && pixel(small, 4, 0, 0, 1) == 1);
  CHECK(pixel(small, 4, 3, 1, 0) == 5 && pixel(small, 4, 3, 1, 1) == 2);
  /* dst_to_src maps the destination's (0, 0) to the crop's corner. */
  CHECK(info.dst_to_src[0][2] == 2.0 && info.dst_to_src[1][2] == 1.0);

  OK(pinframe_convert_options_init(&o));
  o.rotation = 90;
  pinframe_tensor *rotated = NULL;
  OK(pinframe_tensor_image(4, 8, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_HEAP,
                           &rotated));
  OK(pinframe_processor_convert(proc, src, rotated, &o, NULL));
  /* Clockwise: the source's bottom-left corner (0, 3) lands at the top-left. */
  CHECK(pixel(rotated, 4, 0, 0, 0) == 0 && pixel(rotated, 4, 0, 0, 1) == 3);

  OK(pinframe_convert_options_init(&o));
  o.fit = PINFRAME_FIT_LETTERBOX;
  o.pad[0] = 114;
  o.pad[1] = 115;
  o.pad[2] = 116;
  pinframe_tensor *square = NULL;
  OK(pinframe_tensor_image(8, 8, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_HEAP,
                           &square));
  OK(pinframe_processor_convert(proc, src, square, &o, &info));
  CHECK(info.content[1] == 2 && info.content[3] == 4 && info.offset[1] == 2);
  CHECK(pixel(square, 8, 3, 0, 0) == 114 && pixel(square, 8, 3, 7, 2) == 116);

  /* mean/std on a float destination: (v / 255 - mean) / std. */
  OK(pinframe_convert_options_init(&o));
  o.mean[0] = 0.5f;
  o.std[0] = 0.25f;
  pinframe_tensor *f = NULL;
  OK(pinframe_tensor_image(8, 4, PINFRAME_FORMAT_PLANAR_RGB, PINFRAME_DTYPE_F32,
                           PINFRAME_MEMORY_HEAP, &f));
  OK(pinframe_processor_convert(proc, src, f, &o, NULL));
  void *data = NULL;
  size_t len = 0;
  OK(pinframe_tensor_map(f, PINFRAME_ACCESS_READ, &data, &len));
  const float *fp = (const float *)data;
  const float expect_r = (7.0f / 255.0f - 0.5f) / 0.25f; /* pixel (7, 0): R = 7 */
  CHECK(fp[7] > expect_r - 1e-5f && fp[7] < expect_r + 1e-5f);
  CHECK(fp[32 + 7] > -1e-6f && fp[32 + 7] < 1e-6f); /* G = 0, identity */
  OK(pinframe_tensor_unmap(f));

  /* Colorimetry fields are checked. */
  OK(pinframe_convert_options_init(&o));
  o.matrix = 7;
  FAILS(pinframe_processor_convert(proc, src, dst, &o, NULL), PINFRAME_ERROR_INVALID_INPUT,
        "unknown matrix 7");

  /* An older caller (the first released struct, before the RAW fields) gets the defaults
   * of what it does not know. */
  OK(pinframe_convert_options_init(&o));
  o.flip = PINFRAME_FLIP_HORIZONTAL;
  o.wb_gains[0] = 0.0f; /* beyond the short struct: must be ignored */
  o.struct_size = offsetof(pinframe_convert_options, black_level);
  OK(pinframe_processor_convert(proc, src, f, &o, NULL));
  OK(pinframe_tensor_map(f, PINFRAME_ACCESS_READ, &data, &len));
  fp = (const float *)data;
  CHECK(fp[0] > 7.0f / 255.0f - 1e-6f && fp[0] < 7.0f / 255.0f + 1e-6f); /* flipped, mean 0 */
  OK(pinframe_tensor_unmap(f));
  /* A size no released header had (it ends before `mean`) is refused, not half read. */
  o.struct_size = offsetof(pinframe_convert_options, mean);
  FAILS(pinframe_processor_convert(proc, src, f, &o, NULL), PINFRAME_ERROR_INVALID_INPUT,
        "is not a size of pinframe_convert_options");

  /* A newer caller's unknown fields: zeros are fine, anything else is refused. */
  struct {
    pinframe_convert_options known;
    uint32_t newer[4];
  } bigger;
  bigger.known.struct_size = sizeof bigger.known;
  OK(pinframe_convert_options_init(&bigger.known));
  bigger.known.struct_size = sizeof bigger;
  memset(bigger.newer, 0, sizeof bigger.newer);
  OK(pinframe_processor_convert(proc, src, dst, &bigger.known, NULL));
  bigger.newer[2] = 1;
  FAILS(pinframe_processor_convert(proc, src, dst, &bigger.known, NULL),
        PINFRAME_ERROR_UNSUPPORTED, "does not know");

  NULL_ARG(pinframe_convert_options_init(NULL), "options");
  OK(pinframe_tensor_free(f));
  OK(pinframe_tensor_free(square));
  OK(pinframe_tensor_free(rotated));
  OK(pinframe_tensor_free(small));
  OK(pinframe_tensor_free(dst));
  OK(pinframe_tensor_free(src));
}

static void convert_refuses_what_it_cannot_do(pinframe_processor *proc) {
  pinframe_tensor *src = gradient(8, 4);
  pinframe_tensor *dst = NULL;
  OK(pinframe_tensor_image(8, 4, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_HEAP, &dst));
  /* Unsupported pairs: a YUV destination; a u16 destination; a float source. */
  pinframe_tensor *yuyv = NULL;
  OK(pinframe_tensor_image(8, 4, PINFRAME_FORMAT_YUYV, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_HEAP,
                           &yuyv));
  FAILS(pinframe_processor_convert(proc, src, yuyv, NULL, NULL), PINFRAME_ERROR_UNSUPPORTED, "yuyv");
  pinframe_tensor *u16 = NULL;
  OK(pinframe_tensor_image(8, 4, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U16, PINFRAME_MEMORY_HEAP,
                           &u16));
  FAILS(pinframe_processor_convert(proc, src, u16, NULL, NULL), PINFRAME_ERROR_UNSUPPORTED, "u16");
  pinframe_tensor *fsrc = NULL;
  OK(pinframe_tensor_image(8, 4, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_F32, PINFRAME_MEMORY_HEAP,
                           &fsrc));
  FAILS(pinframe_processor_convert(proc, fsrc, dst, NULL, NULL), PINFRAME_ERROR_UNSUPPORTED,
        "sources are u8 images");
  /* Misuse. */
  FAILS(pinframe_processor_convert(proc, src, src, NULL, NULL), PINFRAME_ERROR_INVALID_INPUT,
        "same tensor");
  size_t n = 96;
  pinframe_tensor *plain = NULL;
  OK(pinframe_tensor_create(PINFRAME_DTYPE_U8, &n, 1, PINFRAME_MEMORY_HEAP, &plain));
  FAILS(pinframe_processor_convert(proc, plain, dst, NULL, NULL), PINFRAME_ERROR_INVALID_INPUT,
        "no image layout");
  FAILS(pinframe_processor_convert(proc, src, plain, NULL, NULL), PINFRAME_ERROR_INVALID_INPUT,
        "no image layout");
  void *data = NULL;
  size_t len = 0;
  OK(pinframe_tensor_map(dst, PINFRAME_ACCESS_READ, &data, &len));
  FAILS(pinframe_processor_convert(proc, src, dst, NULL, NULL), PINFRAME_ERROR_INVALID_INPUT,
        "unmap first");
  OK(pinframe_tensor_unmap(dst));
  pinframe_convert_options o;
  o.struct_size = sizeof o;
  OK(pinframe_convert_options_init(&o));
  o.rotation = 45;
  FAILS(pinframe_processor_convert(proc, src, dst, &o, NULL), PINFRAME_ERROR_INVALID_INPUT,
        "rotation 45");
  OK(pinframe_convert_options_init(&o));
  o.fit = 5;
  FAILS(pinframe_processor_convert(proc, src, dst, &o, NULL), PINFRAME_ERROR_INVALID_INPUT,
        "unknown fit 5");
  OK(pinframe_convert_options_init(&o));
  o.has_crop = 1;
  o.crop.width = 9;
  o.crop.height = 4;
  FAILS(pinframe_processor_convert(proc, src, dst, &o, NULL), PINFRAME_ERROR_INVALID_INPUT, "crop");
  OK(pinframe_convert_options_init(&o));
  o.std[1] = 0.0f;
  FAILS(pinframe_processor_convert(proc, src, dst, &o, NULL), PINFRAME_ERROR_INVALID_INPUT, "std");
  /* The wrong kind of handle is caught, not followed. */
  FAILS(pinframe_processor_convert(proc, (const pinframe_tensor *)(const void *)proc, dst, NULL,
                                   NULL),
        PINFRAME_ERROR_INVALID_INPUT, "not a live pinframe_tensor handle");
  NULL_ARG(pinframe_processor_convert(NULL, src, dst, NULL, NULL), "processor");
  NULL_ARG(pinframe_processor_convert(proc, NULL, dst, NULL, NULL), "src");
  NULL_ARG(pinframe_processor_convert(proc, src, NULL, NULL, NULL), "dst");
  OK(pinframe_tensor_free(plain));
  OK(pinframe_tensor_free(fsrc));
  OK(pinframe_tensor_free(u16));
  OK(pinframe_tensor_free(yuyv));
  OK(pinframe_tensor_free(dst));
  OK(pinframe_tensor_free(src));
}

/* ---- RAW sources and the ISP options ---- */

/* A flat RGGB10 patch: R sites read r, both greens g, B sites b, as little-endian words. */
static pinframe_tensor *flat_rggb10(uint32_t w, uint32_t h, uint16_t r, uint16_t g, uint16_t b) {
  pinframe_tensor *t = NULL;
  OK(pinframe_tensor_image(w, h, PINFRAME_FORMAT_RGGB10, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_HEAP,
                           &t));
  pinframe_layout l;
  l.struct_size = sizeof l;
  OK(pinframe_tensor_get_layout(t, &l));
  CHECK(l.plane_count == 1 && l.planes[0].stride == 2 * w);
  void *data = NULL;
  size_t len = 0;
  OK(pinframe_tensor_map(t, PINFRAME_ACCESS_WRITE, &data, &len));
  CHECK(len >= (size_t)2 * w * h);
  unsigned char *p = (unsigned char *)data;
  for (uint32_t y = 0; y < h; y++) {
    for (uint32_t x = 0; x < w; x++) {
      uint16_t v = (y % 2 == 0) ? (x % 2 == 0 ? r : g) : (x % 2 == 0 ? g : b);
      p[y * l.planes[0].stride + 2 * x] = (unsigned char)(v & 0xFF);
      p[y * l.planes[0].stride + 2 * x + 1] = (unsigned char)(v >> 8);
    }
  }
  OK(pinframe_tensor_unmap(t));
  return t;
}

static int near(unsigned v, double expect) { return v + 1.0 >= expect && v <= expect + 1.0; }

static void raw_bayer_with_isp_options(void) {
  pinframe_processor *cpu = NULL;
  OK(pinframe_processor_create(PINFRAME_BACKEND_CPU, &cpu));
  /* A flat patch demosaics exactly, so each channel is
   * 255 * clamp((code - black) / (1023 - black) * gain). */
  pinframe_tensor *src = flat_rggb10(8, 6, 600, 400, 300);
  pinframe_tensor *dst = NULL;
  OK(pinframe_tensor_image(4, 4, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_HEAP, &dst));

  pinframe_convert_options o;
  o.struct_size = sizeof o;
  OK(pinframe_convert_options_init(&o));
  CHECK(o.black_level[0] == 0 && o.black_level[3] == 0);
  CHECK(o.wb_gains[0] == 1.0f && o.wb_gains[2] == 1.0f);
  CHECK(o.ccm[0][0] == 1.0f && o.ccm[0][1] == 0.0f && o.ccm[2][2] == 1.0f);
  CHECK(o.gamma == PINFRAME_GAMMA_LINEAR);
  OK(pinframe_processor_convert(cpu, src, dst, &o, NULL));
  CHECK(near(pixel(dst, 4, 1, 1, 0), 255.0 * 600 / 1023));
  CHECK(near(pixel(dst, 4, 1, 1, 1), 255.0 * 400 / 1023));
  CHECK(near(pixel(dst, 4, 1, 1, 2), 255.0 * 300 / 1023));

  for (int i = 0; i < 4; i++) o.black_level[i] = 64;
  o.wb_gains[0] = 1.5f;
  o.wb_gains[2] = 2.0f;
  OK(pinframe_processor_convert(cpu, src, dst, &o, NULL));
  for (uint32_t y = 0; y < 4; y++) {
    for (uint32_t x = 0; x < 4; x++) {
      CHECK(near(pixel(dst, 4, x, y, 0), 255.0 * (600 - 64) / 959.0 * 1.5));
      CHECK(near(pixel(dst, 4, x, y, 1), 255.0 * (400 - 64) / 959.0));
      CHECK(near(pixel(dst, 4, x, y, 2), 255.0 * (300 - 64) / 959.0 * 2.0));
    }
  }

  /* The matrix swaps R and B; sRGB lifts the (linear) green. */
  OK(pinframe_convert_options_init(&o));
  o.ccm[0][0] = 0.0f;
  o.ccm[0][2] = 1.0f;
  o.ccm[2][0] = 1.0f;
  o.ccm[2][2] = 0.0f;
  o.gamma = PINFRAME_GAMMA_SRGB;
  OK(pinframe_processor_convert(cpu, src, dst, &o, NULL));
  CHECK(pixel(dst, 4, 2, 2, 0) < pixel(dst, 4, 2, 2, 2));
  CHECK(pixel(dst, 4, 2, 2, 1) > 255.0 * 400 / 1023 + 40);

  /* An older caller, whose struct ends before the RAW fields, gets a plain demosaic. */
  OK(pinframe_convert_options_init(&o));
  o.black_level[0] = 500;
  o.wb_gains[0] = 0.0f; /* beyond the short struct: must be ignored */
  o.struct_size = offsetof(pinframe_convert_options, black_level);
  OK(pinframe_processor_convert(cpu, src, dst, &o, NULL));
  CHECK(near(pixel(dst, 4, 0, 0, 0), 255.0 * 600 / 1023));

  /* Bad values: the status, and a message that names the parameter. */
  o.struct_size = sizeof o;
  OK(pinframe_convert_options_init(&o));
  o.black_level[3] = 1023; /* the white level of 10 bits */
  FAILS(pinframe_processor_convert(cpu, src, dst, &o, NULL), PINFRAME_ERROR_INVALID_INPUT,
        "isp black level 1023 at the B sites is not below the white level 1023");
  OK(pinframe_convert_options_init(&o));
  o.wb_gains[1] = 0.0f;
  FAILS(pinframe_processor_convert(cpu, src, dst, &o, NULL), PINFRAME_ERROR_INVALID_INPUT,
        "isp gain 0 for G");
  OK(pinframe_convert_options_init(&o));
  o.ccm[1][1] = INFINITY;
  FAILS(pinframe_processor_convert(cpu, src, dst, &o, NULL), PINFRAME_ERROR_INVALID_INPUT,
        "colour-correction matrix");
  OK(pinframe_convert_options_init(&o));
  o.gamma = 2;
  FAILS(pinframe_processor_convert(cpu, src, dst, &o, NULL), PINFRAME_ERROR_INVALID_INPUT,
        "unknown gamma 2");
  /* RAW formats are sources only, and Bayer sizes are whole 2x2 tiles. */
  pinframe_tensor *odd = NULL;
  FAILS(pinframe_tensor_image(7, 6, PINFRAME_FORMAT_BGGR8, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_HEAP,
                              &odd),
        PINFRAME_ERROR_INVALID_INPUT, "7x6 bggr8: the width must be a multiple of 2");
  pinframe_tensor *raw_dst = NULL;
  OK(pinframe_tensor_image(4, 4, PINFRAME_FORMAT_RGGB8, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_HEAP,
                           &raw_dst));
  FAILS(pinframe_processor_convert(cpu, dst, raw_dst, NULL, NULL), PINFRAME_ERROR_UNSUPPORTED,
        "rggb8");
  OK(pinframe_tensor_free(raw_dst));
  OK(pinframe_tensor_free(dst));
  OK(pinframe_tensor_free(src));
  OK(pinframe_processor_free(cpu));
}

static void processors(void) {
  pinframe_processor *cpu = NULL;
  OK(pinframe_processor_create(PINFRAME_BACKEND_CPU, &cpu));
  pinframe_backend b = 99;
  OK(pinframe_processor_get_backend(cpu, &b));
  CHECK(b == PINFRAME_BACKEND_CPU);
  convert_options_do_what_they_say(cpu);
  convert_refuses_what_it_cannot_do(cpu);
  pinframe_processor_stats stats;
  stats.struct_size = sizeof stats;
  OK(pinframe_processor_get_stats(cpu, &stats));
  CHECK(stats.frames == 8 && stats.imports == 0 && stats.cpu_fallbacks == 0);
  NULL_ARG(pinframe_processor_get_stats(NULL, &stats), "processor");
  NULL_ARG(pinframe_processor_get_stats(cpu, NULL), "stats");
  NULL_ARG(pinframe_processor_get_backend(NULL, &b), "processor");
  NULL_ARG(pinframe_processor_get_backend(cpu, NULL), "backend");

  /* AUTO: the CPU on a software rasteriser, GL on a GPU; either converts. */
  pinframe_processor *automatic = NULL;
  OK(pinframe_processor_create(PINFRAME_BACKEND_AUTO, &automatic));
  OK(pinframe_processor_get_backend(automatic, &b));
  CHECK(b == PINFRAME_BACKEND_CPU || b == PINFRAME_BACKEND_GL);
  OK(pinframe_processor_free(automatic));

  /* GL (Mesa llvmpipe here): converts like the CPU. */
  pinframe_processor *gl = NULL;
  pinframe_status s = pinframe_processor_create(PINFRAME_BACKEND_GL, &gl);
  if (s != PINFRAME_OK) {
    const char *ci = getenv("CI");
    fprintf(stderr, "SKIPPED the GL processor: %s: %s\n", pinframe_status_name(s),
            pinframe_last_error());
    CHECK(gl == NULL);
    CHECK(ci == NULL || strcmp(ci, "true") != 0); /* under CI=true GL must start */
  } else {
    OK(pinframe_processor_get_backend(gl, &b));
    CHECK(b == PINFRAME_BACKEND_GL);
    pinframe_tensor *src = gradient(8, 4);
    pinframe_tensor *a = NULL, *c = NULL;
    OK(pinframe_tensor_image(5, 3, PINFRAME_FORMAT_BGR, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_HEAP, &a));
    OK(pinframe_tensor_image(5, 3, PINFRAME_FORMAT_BGR, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_HEAP, &c));
    OK(pinframe_processor_convert(gl, src, a, NULL, NULL));
    OK(pinframe_processor_convert(cpu, src, c, NULL, NULL));
    void *pa = NULL, *pc = NULL;
    size_t la = 0, lc = 0;
    OK(pinframe_tensor_map(a, PINFRAME_ACCESS_READ, &pa, &la));
    OK(pinframe_tensor_map(c, PINFRAME_ACCESS_READ, &pc, &lc));
    for (size_t i = 0; i < la; i++) {
      int d = (int)((unsigned char *)pa)[i] - (int)((unsigned char *)pc)[i];
      CHECK(d >= -1 && d <= 1);
    }
    OK(pinframe_tensor_unmap(a));
    OK(pinframe_tensor_unmap(c));
    OK(pinframe_processor_get_stats(gl, &stats));
    CHECK(stats.frames == 1 && stats.uploads == 1);
    /* GL refuses a planar-RGB source, as its capability list says. */
    pinframe_tensor *planar = NULL;
    OK(pinframe_tensor_image(8, 4, PINFRAME_FORMAT_PLANAR_RGB, PINFRAME_DTYPE_U8,
                             PINFRAME_MEMORY_HEAP, &planar));
    FAILS(pinframe_processor_convert(gl, planar, a, NULL, NULL), PINFRAME_ERROR_UNSUPPORTED,
          "planar");
    OK(pinframe_tensor_free(planar));
    OK(pinframe_tensor_free(a));
    OK(pinframe_tensor_free(c));
    OK(pinframe_tensor_free(src));
    OK(pinframe_processor_free(gl));
  }

  FAILS(pinframe_processor_create(7, &gl), PINFRAME_ERROR_INVALID_INPUT, "unknown backend 7");
  CHECK(gl == NULL);
  NULL_ARG(pinframe_processor_create(PINFRAME_BACKEND_CPU, NULL), "out");
  FAILS(pinframe_processor_free((pinframe_processor *)(void *)&stats),
        PINFRAME_ERROR_INVALID_INPUT, "not a live pinframe_processor handle");
  OK(pinframe_processor_free(NULL));
  OK(pinframe_processor_free(cpu));
}

/* ---- cameras and frames ---- */

static void synthetic_camera_and_frames(void) {
  pinframe_camera_config config;
  config.struct_size = sizeof config;
  OK(pinframe_camera_config_init(&config));
  CHECK(config.buffers == 4 && config.timeout_ms == 5000 && config.dma_route == NULL);
  config.width = 64;
  config.height = 48;
  config.format = PINFRAME_FORMAT_NV12;
  config.buffers = 2;
  config.buffer_mode = PINFRAME_BUFFER_MODE_MMAP;
  pinframe_camera *cam = NULL;
  OK(pinframe_camera_synthetic(&config, &cam));
  pinframe_camera_info info;
  info.struct_size = sizeof info;
  OK(pinframe_camera_get_info(cam, &info));
  CHECK(info.width == 64 && info.height == 48 && info.format == PINFRAME_FORMAT_NV12);
  CHECK(info.synthetic == 1 && info.buffer_count == 2 && info.held_buffers == 0);
  CHECK(info.buffer_mode == PINFRAME_BUFFER_MODE_MMAP);

  pinframe_frame *a = NULL, *b = NULL, *c = NULL;
  OK(pinframe_camera_next_frame(cam, -1, &a));
  OK(pinframe_camera_next_frame(cam, 1000, &b));
  FAILS(pinframe_camera_next_frame(cam, 0, &c), PINFRAME_ERROR_ALL_BUFFERS_HELD,
        "all 2 capture buffers are held");
  CHECK(c == NULL);
  OK(pinframe_camera_get_info(cam, &info));
  CHECK(info.held_buffers == 2 && info.frames == 2);

  pinframe_frame_info fa, fb;
  fa.struct_size = fb.struct_size = sizeof fa;
  OK(pinframe_frame_get_info(a, &fa));
  OK(pinframe_frame_get_info(b, &fb));
  CHECK(fb.sequence == fa.sequence + 1 && fa.buffer_index != fb.buffer_index);
  CHECK(fa.bytesused == 64 * 48 * 3 / 2 && fb.timestamp_ns >= fa.timestamp_ns);

  const pinframe_tensor *t = NULL;
  OK(pinframe_frame_get_tensor(a, &t));
  pinframe_tensor_info ti;
  ti.struct_size = sizeof ti;
  OK(pinframe_tensor_get_info(t, &ti));
  CHECK(ti.is_frame == 1 && ti.dtype == PINFRAME_DTYPE_U8 && ti.memory == PINFRAME_MEMORY_SHM);
  pinframe_layout l;
  l.struct_size = sizeof l;
  OK(pinframe_tensor_get_layout(t, &l));
  CHECK(l.format == PINFRAME_FORMAT_NV12 && l.matrix == PINFRAME_MATRIX_BT601 &&
        l.range == PINFRAME_RANGE_LIMITED);
  /* A frame's tensor: readable, never writable, never freed by the caller. */
  void *data = NULL;
  size_t len = 0;
  FAILS(pinframe_tensor_map(t, PINFRAME_ACCESS_WRITE, &data, &len), PINFRAME_ERROR_INVALID_INPUT,
        "read-only");
  OK(pinframe_tensor_map(t, PINFRAME_ACCESS_READ, &data, &len));
  CHECK(len == 64 * 48 * 3 / 2);
  FAILS(pinframe_tensor_free((pinframe_tensor *)t), PINFRAME_ERROR_INVALID_INPUT,
        "belongs to a frame");
  pinframe_tensor *dst = NULL;
  OK(pinframe_tensor_image(32, 24, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_HEAP, &dst));
  pinframe_processor *proc = NULL;
  OK(pinframe_processor_create(PINFRAME_BACKEND_CPU, &proc));
  pinframe_convert_info ci;
  ci.struct_size = sizeof ci;
  OK(pinframe_processor_convert(proc, t, dst, NULL, &ci)); /* while mapped for reading */
  CHECK(ci.matrix == PINFRAME_MATRIX_BT601 && ci.range == PINFRAME_RANGE_LIMITED);
  FAILS(pinframe_processor_convert(proc, dst, (pinframe_tensor *)t, NULL, NULL),
        PINFRAME_ERROR_INVALID_INPUT, "cannot be a destination");
  OK(pinframe_processor_free(proc));
  OK(pinframe_tensor_free(dst));

  /* Release gives the buffer back (and ends the frame tensor's mapping). */
  OK(pinframe_frame_release(a));
  OK(pinframe_camera_next_frame(cam, -1, &c));
  OK(pinframe_frame_release(c));
  /* A frame outlives its camera. */
  OK(pinframe_camera_free(cam));
  OK(pinframe_frame_get_tensor(b, &t));
  OK(pinframe_tensor_map(t, PINFRAME_ACCESS_READ, &data, &len));
  OK(pinframe_tensor_unmap(t));
  OK(pinframe_frame_release(b));
  OK(pinframe_frame_release(NULL));
  OK(pinframe_camera_free(NULL));

  NULL_ARG(pinframe_camera_config_init(NULL), "config");
  NULL_ARG(pinframe_camera_synthetic(&config, NULL), "out");
  NULL_ARG(pinframe_camera_get_info(NULL, &info), "camera");
  NULL_ARG(pinframe_camera_next_frame(NULL, 0, &a), "camera");
  NULL_ARG(pinframe_frame_get_tensor(NULL, &t), "frame");
  NULL_ARG(pinframe_frame_get_info(NULL, &fa), "frame");
  OK(pinframe_camera_synthetic(NULL, &cam)); /* defaults: 640x480 YUYV */
  OK(pinframe_camera_get_info(cam, &info));
  CHECK(info.width == 640 && info.height == 480 && info.format == PINFRAME_FORMAT_YUYV);
  NULL_ARG(pinframe_camera_get_info(cam, NULL), "info");
  NULL_ARG(pinframe_camera_next_frame(cam, 0, NULL), "frame");
  OK(pinframe_camera_next_frame(cam, -1, &a));
  NULL_ARG(pinframe_frame_get_tensor(a, NULL), "tensor");
  NULL_ARG(pinframe_frame_get_info(a, NULL), "info");
  FAILS(pinframe_frame_release((pinframe_frame *)(void *)cam), PINFRAME_ERROR_INVALID_INPUT,
        "not a live pinframe_frame handle");
  OK(pinframe_frame_release(a));
  OK(pinframe_camera_free(cam));
}

static void camera_errors(void) {
  pinframe_camera_config config;
  config.struct_size = sizeof config;
  OK(pinframe_camera_config_init(&config));
  pinframe_camera *cam = NULL;
  config.buffers = 0;
  FAILS(pinframe_camera_synthetic(&config, &cam), PINFRAME_ERROR_INVALID_INPUT, "buffer count 0");
  OK(pinframe_camera_config_init(&config));
  config.format = 123;
  FAILS(pinframe_camera_synthetic(&config, &cam), PINFRAME_ERROR_INVALID_INPUT,
        "unknown pixel format 123");
  OK(pinframe_camera_config_init(&config));
  config.buffer_mode = 9;
  FAILS(pinframe_camera_synthetic(&config, &cam), PINFRAME_ERROR_INVALID_INPUT,
        "unknown buffer mode 9");
  OK(pinframe_camera_config_init(&config));
  config.dma_route = "ion";
  FAILS(pinframe_camera_synthetic(&config, &cam), PINFRAME_ERROR_INVALID_INPUT,
        "unknown DMA route");
  OK(pinframe_camera_config_init(&config));
  config.format = PINFRAME_FORMAT_RGB; /* the synthetic camera makes YUYV, NV12 and Bayer */
  FAILS(pinframe_camera_synthetic(&config, &cam), PINFRAME_ERROR_UNSUPPORTED, "rgb");
  CHECK(cam == NULL);

  OK(pinframe_camera_config_init(&config));
  FAILS(pinframe_camera_open("/dev/video-pinframe-none", &config, &cam), PINFRAME_ERROR_IO,
        "/dev/video-pinframe-none");
  FAILS(pinframe_camera_open("/dev/null", NULL, &cam), PINFRAME_ERROR_INVALID_INPUT,
        "not a V4L2 device");
  NULL_ARG(pinframe_camera_open(NULL, &config, &cam), "path");
  NULL_ARG(pinframe_camera_open("/dev/video0", &config, NULL), "out");
  config.struct_size = 3;
  FAILS(pinframe_camera_open("/dev/video0", &config, &cam), PINFRAME_ERROR_INVALID_INPUT,
        "struct_size 3");
  CHECK(cam == NULL);
}

/* ---- the guard ---- */

static void set_flag(void *ctx) { *(int *)ctx = 1; }

static void guard_entry_points(void) {
  const pinframe_guard_table *g = pinframe_get_guard_table();
  CHECK(g != NULL && g->version == PINFRAME_GUARD_ABI_VERSION);
  CHECK(g->struct_size == sizeof(pinframe_guard_table));
  CHECK(g->waiters() == 0 && g->excluded_now() == 0 && g->thread_excludes() == 0);
  int ran = 0;
  OK(pinframe_with_cpu_mappings_excluded(set_flag, &ran));
  CHECK(ran == 1);
  NULL_ARG(pinframe_with_cpu_mappings_excluded(NULL, &ran), "callback");
  /* The table's own calls nest and report the section (the C application's view of
   * what copies of pinframe call). */
  g->exclusive_acquire();
  CHECK(g->thread_excludes() == 1 && g->excluded_now() == 1);
  CHECK(g->shared_acquire() == 1); /* granted under this thread's own section */
  g->exclusive_acquire();
  g->exclusive_release();
  CHECK(g->thread_excludes() == 1);
  g->exclusive_release();
  CHECK(g->thread_excludes() == 0 && g->excluded_now() == 0);
  g->shared_release(); /* the hold granted inside became a real one, released here */
  CHECK(g->defer_unmap(NULL, 0, NULL, NULL) == 0); /* not inside a section */
}

/* A synthetic camera's config: `width`x`height`, two MMAP buffers, the rest defaults. */
static pinframe_camera_config two_mmap_buffers(uint32_t width, uint32_t height) {
  pinframe_camera_config config;
  config.struct_size = sizeof config;
  OK(pinframe_camera_config_init(&config));
  config.width = width;
  config.height = height;
  config.buffers = 2;
  config.buffer_mode = PINFRAME_BUFFER_MODE_MMAP;
  return config;
}

/* ---- struct sizes: only the released layouts ---- */

static void struct_sizes_are_released_layouts(void) {
  /* The camera config: one released layout. A size that ends inside `dma_route` (half
   * of a pointer) is refused before the pointer is read. */
  pinframe_camera_config config = two_mmap_buffers(64, 48);
  config.dma_route = "udmabuf"; /* read only in DMABUF mode, but parsed when given */
  pinframe_camera *cam = NULL;
  char expect[128];
  size_t torn_config[] = {offsetof(pinframe_camera_config, dma_route) + 4,
                          offsetof(pinframe_camera_config, dma_route) + 1,
                          sizeof config - 1, 12, 9};
  for (size_t i = 0; i < sizeof torn_config / sizeof torn_config[0]; i++) {
    config.struct_size = torn_config[i];
    snprintf(expect, sizeof expect, "struct_size %zu is not a size of pinframe_camera_config",
             torn_config[i]);
    FAILS(pinframe_camera_synthetic(&config, &cam), PINFRAME_ERROR_INVALID_INPUT, expect);
    snprintf(expect, sizeof expect, "accepted sizes: %zu,", sizeof config);
    FAILS(pinframe_camera_synthetic(&config, &cam), PINFRAME_ERROR_INVALID_INPUT, expect);
    CHECK(cam == NULL);
    FAILS(pinframe_camera_config_init(&config), PINFRAME_ERROR_INVALID_INPUT, "struct_size");
  }
  config.struct_size = sizeof config;
  OK(pinframe_camera_synthetic(&config, &cam));
  pinframe_camera_info info;
  info.struct_size = sizeof info;
  OK(pinframe_camera_get_info(cam, &info));
  CHECK(info.width == 64 && info.buffer_count == 2);
  /* Out-structs are checked the same way: nothing half written. */
  memset(&info, 0xAB, sizeof info);
  info.struct_size = offsetof(pinframe_camera_info, frames) + 4;
  FAILS(pinframe_camera_get_info(cam, &info), PINFRAME_ERROR_INVALID_INPUT,
        "is not a size of pinframe_camera_info");
  CHECK(info.width == 0xABABABABu);
  OK(pinframe_camera_free(cam));

  /* The convert options: the first layout (before the RAW block) and today's. */
  size_t accepted[] = {offsetof(pinframe_convert_options, black_level),
                       sizeof(pinframe_convert_options)};
  size_t torn[] = {offsetof(pinframe_convert_options, black_level) + 2,
                   offsetof(pinframe_convert_options, wb_gains) + 2,
                   offsetof(pinframe_convert_options, gamma),
                   sizeof(pinframe_convert_options) - 4,
                   offsetof(pinframe_convert_options, std) + 2,
                   offsetof(pinframe_convert_options, has_crop)};
  pinframe_processor *proc = NULL;
  OK(pinframe_processor_create(PINFRAME_BACKEND_CPU, &proc));
  pinframe_tensor *src = gradient(8, 8), *dst = NULL;
  OK(pinframe_tensor_image(8, 8, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_HEAP,
                           &dst));
  pinframe_convert_options o;
  for (size_t i = 0; i < 2; i++) {
    o.struct_size = sizeof o;
    OK(pinframe_convert_options_init(&o));
    o.struct_size = accepted[i];
    OK(pinframe_convert_options_init(&o));
    CHECK(o.struct_size == accepted[i]);
    OK(pinframe_processor_convert(proc, src, dst, &o, NULL));
  }
  snprintf(expect, sizeof expect, "(accepted sizes: %zu, %zu, or larger",
           accepted[0], accepted[1]);
  for (size_t i = 0; i < sizeof torn / sizeof torn[0]; i++) {
    o.struct_size = sizeof o;
    OK(pinframe_convert_options_init(&o));
    o.struct_size = torn[i];
    FAILS(pinframe_processor_convert(proc, src, dst, &o, NULL), PINFRAME_ERROR_INVALID_INPUT,
          expect);
    FAILS(pinframe_convert_options_init(&o), PINFRAME_ERROR_INVALID_INPUT, expect);
  }

  /* The layout: one released layout. */
  pinframe_layout l = layout_of(8, 8, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8);
  pinframe_tensor *t = NULL;
  l.struct_size = offsetof(pinframe_layout, planes) + 4;
  FAILS(pinframe_tensor_with_layout(&l, PINFRAME_MEMORY_HEAP, &t), PINFRAME_ERROR_INVALID_INPUT,
        "is not a size of pinframe_layout");
  l.struct_size = sizeof l - 4;
  FAILS(pinframe_tensor_set_layout(dst, &l), PINFRAME_ERROR_INVALID_INPUT,
        "is not a size of pinframe_layout");
  FAILS(pinframe_tensor_get_layout(dst, &l), PINFRAME_ERROR_INVALID_INPUT,
        "is not a size of pinframe_layout");
  l.struct_size = sizeof l;
  OK(pinframe_tensor_with_layout(&l, PINFRAME_MEMORY_HEAP, &t));
  OK(pinframe_tensor_free(t));
  OK(pinframe_tensor_free(src));
  OK(pinframe_tensor_free(dst));
  OK(pinframe_processor_free(proc));
}

/* ---- a conversion's source and destination never share memory ---- */

static void fill_bytes(pinframe_tensor *t, unsigned char seed) {
  void *data = NULL;
  size_t len = 0;
  OK(pinframe_tensor_map(t, PINFRAME_ACCESS_WRITE, &data, &len));
  for (size_t i = 0; i < len; i++) ((unsigned char *)data)[i] = (unsigned char)(seed + i * 7);
  OK(pinframe_tensor_unmap(t));
}

static void overlapping_src_and_dst_are_refused(void) {
  pinframe_processor *proc = NULL;
  OK(pinframe_processor_create(PINFRAME_BACKEND_CPU, &proc));
  /* One memfd of two 8x8 RGB images, the source the top one. */
  pinframe_tensor *whole = NULL;
  OK(pinframe_tensor_image(8, 16, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_SHM,
                           &whole));
  fill_bytes(whole, 3);
  pinframe_layout top = layout_of(8, 8, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8);
  OK(pinframe_tensor_set_layout(whole, &top));
  int fd = -1;
  OK(pinframe_tensor_get_fd(whole, 0, &fd));

  /* The bottom image of the same memfd: no byte in common, converted. */
  pinframe_layout bottom = top;
  bottom.planes[0].offset = 8 * 8 * 3;
  pinframe_tensor *dst = NULL;
  OK(pinframe_tensor_import(fd, &bottom, &dst));
  OK(pinframe_processor_convert(proc, whole, dst, NULL, NULL));
  void *data = NULL;
  size_t len = 0;
  OK(pinframe_tensor_map(whole, PINFRAME_ACCESS_READ, &data, &len));
  CHECK(len == 8 * 16 * 3);
  CHECK(memcmp(data, (unsigned char *)data + 8 * 8 * 3, 8 * 8 * 3) == 0); /* RGB -> RGB */
  OK(pinframe_tensor_unmap(whole));
  OK(pinframe_tensor_free(dst));

  /* Half way down: rows 4..7 of the source are rows 0..3 of the destination. */
  pinframe_layout middle = top;
  middle.planes[0].offset = 4 * 8 * 3;
  OK(pinframe_tensor_import(fd, &middle, &dst));
  FAILS(pinframe_processor_convert(proc, whole, dst, NULL, NULL), PINFRAME_ERROR_INVALID_INPUT,
        "src and dst overlap: bytes 0..192 of src's buffer 0 and bytes 96..288 of dst's buffer 0");
  OK(pinframe_tensor_free(dst));
  /* The same bytes exactly (a second import of one fd). */
  OK(pinframe_tensor_import(fd, &top, &dst));
  FAILS(pinframe_processor_convert(proc, whole, dst, NULL, NULL), PINFRAME_ERROR_INVALID_INPUT,
        "same memory (one dma-buf or memfd)");
  FAILS(pinframe_processor_convert(proc, dst, whole, NULL, NULL), PINFRAME_ERROR_INVALID_INPUT,
        "src and dst overlap");
  OK(pinframe_tensor_free(dst));

  /* A frame's buffer imported as a destination. */
  pinframe_camera_config config = two_mmap_buffers(16, 16);
  pinframe_camera *cam = NULL;
  OK(pinframe_camera_synthetic(&config, &cam));
  pinframe_frame *frame = NULL;
  OK(pinframe_camera_next_frame(cam, -1, &frame));
  const pinframe_tensor *ft = NULL;
  OK(pinframe_frame_get_tensor(frame, &ft));
  pinframe_layout fl;
  fl.struct_size = sizeof fl;
  OK(pinframe_tensor_get_layout(ft, &fl));
  int frame_fd = -1;
  OK(pinframe_tensor_get_fd(ft, 0, &frame_fd));
  pinframe_tensor *alias = NULL;
  OK(pinframe_tensor_import(frame_fd, &fl, &alias));
  FAILS(pinframe_processor_convert(proc, ft, alias, NULL, NULL), PINFRAME_ERROR_INVALID_INPUT,
        "src and dst overlap");
  pinframe_tensor *own = NULL;
  OK(pinframe_tensor_image(16, 16, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_SHM,
                           &own));
  OK(pinframe_processor_convert(proc, ft, own, NULL, NULL)); /* memory of its own */
  OK(pinframe_tensor_free(own));
  OK(pinframe_tensor_free(alias));
  OK(pinframe_frame_release(frame));
  OK(pinframe_camera_free(cam));
  OK(pinframe_tensor_free(whole));
  OK(pinframe_processor_free(proc));
}

/* ---- a pin of a frame keeps its buffer from the driver ---- */

static void a_pinned_frame_is_not_requeued(void) {
  pinframe_camera_config config = two_mmap_buffers(64, 48);
  pinframe_camera *cam = NULL;
  OK(pinframe_camera_synthetic(&config, &cam));
  pinframe_camera_info info;
  info.struct_size = sizeof info;
  pinframe_frame_info fi;
  fi.struct_size = sizeof fi;

  pinframe_frame *a = NULL, *b = NULL, *c = NULL;
  OK(pinframe_camera_next_frame(cam, -1, &a));
  OK(pinframe_frame_get_info(a, &fi));
  uint32_t pinned_index = fi.buffer_index;
  const pinframe_tensor *t = NULL;
  OK(pinframe_frame_get_tensor(a, &t));
  pinframe_pin *pin = NULL;
  OK(pinframe_tensor_pin(t, &pin));
  void *addr = NULL;
  size_t len = 0, align = 0;
  OK(pinframe_pin_get_data(pin, &addr, &len, &align));
  CHECK(len == 64 * 48 * 2);
  unsigned char *copy = (unsigned char *)malloc(len);
  CHECK(copy != NULL);
  OK(pinframe_tensor_sync_for_cpu(t, PINFRAME_ACCESS_READ));
  memcpy(copy, addr, len);

  /* Released, but pinned: the buffer stays out of the camera's queue. */
  OK(pinframe_frame_release(a));
  OK(pinframe_camera_get_info(cam, &info));
  CHECK(info.held_buffers == 1);
  /* The camera draws frame after frame into the other buffer only. */
  for (int i = 0; i < 3; i++) {
    OK(pinframe_camera_next_frame(cam, -1, &b));
    OK(pinframe_frame_get_info(b, &fi));
    CHECK(fi.buffer_index != pinned_index);
    FAILS(pinframe_camera_next_frame(cam, 0, &c), PINFRAME_ERROR_ALL_BUFFERS_HELD,
          "all 2 capture buffers are held");
    OK(pinframe_frame_release(b));
  }
  CHECK(memcmp(copy, addr, len) == 0); /* never refilled under the pin */

  /* The last pin freed: the buffer goes back, and is drawn into again. */
  OK(pinframe_pin_free(pin));
  OK(pinframe_camera_get_info(cam, &info));
  CHECK(info.held_buffers == 0);
  OK(pinframe_camera_next_frame(cam, -1, &b));
  OK(pinframe_camera_next_frame(cam, -1, &c));
  pinframe_frame_info fb, fc;
  fb.struct_size = fc.struct_size = sizeof fb;
  OK(pinframe_frame_get_info(b, &fb));
  OK(pinframe_frame_get_info(c, &fc));
  CHECK(fb.buffer_index == pinned_index || fc.buffer_index == pinned_index);
  OK(pinframe_frame_release(b));
  OK(pinframe_frame_release(c));
  free(copy);
  OK(pinframe_camera_free(cam));
}

/* ---- bad numbers: a status and a message, never a panic ---- */

/* The call fails with `code` (and so not PINFRAME_ERROR_PANIC). */
#define REFUSED(call, code, needle) FAILS(call, code, needle)

static void bad_numbers_are_refused(void) {
  pinframe_camera_config config = two_mmap_buffers(32, 16);
  pinframe_camera *cam = NULL;
  OK(pinframe_camera_synthetic(&config, &cam));
  pinframe_frame *f = NULL;
  REFUSED(pinframe_camera_next_frame(cam, INT64_MAX, &f), PINFRAME_ERROR_INVALID_INPUT,
          "longer than PINFRAME_TIMEOUT_MS_MAX");
  REFUSED(pinframe_camera_next_frame(cam, (int64_t)PINFRAME_TIMEOUT_MS_MAX + 1, &f),
          PINFRAME_ERROR_INVALID_INPUT, "PINFRAME_TIMEOUT_MS_MAX");
  CHECK(f == NULL);
  OK(pinframe_camera_next_frame(cam, PINFRAME_TIMEOUT_MS_MAX, &f));
  OK(pinframe_frame_release(f));
  OK(pinframe_camera_next_frame(cam, INT64_MIN, &f)); /* negative: the configured timeout */
  OK(pinframe_frame_release(f));
  OK(pinframe_camera_free(cam));

  pinframe_camera_config bad = config;
  bad.timeout_ms = UINT32_MAX;
  REFUSED(pinframe_camera_synthetic(&bad, &cam), PINFRAME_ERROR_INVALID_INPUT,
          "config.timeout_ms");
  bad = config;
  bad.timeout_ms = 0;
  REFUSED(pinframe_camera_synthetic(&bad, &cam), PINFRAME_ERROR_INVALID_INPUT, "timeout");
  bad = config;
  bad.buffers = UINT32_MAX;
  REFUSED(pinframe_camera_synthetic(&bad, &cam), PINFRAME_ERROR_INVALID_INPUT, "buffer");
  bad = config;
  bad.width = UINT32_MAX;
  bad.height = UINT32_MAX;
  REFUSED(pinframe_camera_synthetic(&bad, &cam), PINFRAME_ERROR_INVALID_INPUT, "");
  bad = config;
  bad.width = 0;
  REFUSED(pinframe_camera_synthetic(&bad, &cam), PINFRAME_ERROR_INVALID_INPUT, "");
  CHECK(cam == NULL);

  /* Tensors: sizes that overflow, zero sizes, alignments. */
  pinframe_tensor *t = NULL;
  size_t huge[2] = {SIZE_MAX, 2};
  REFUSED(pinframe_tensor_create(PINFRAME_DTYPE_F32, huge, 2, PINFRAME_MEMORY_HEAP, &t),
          PINFRAME_ERROR_INVALID_INPUT, "");
  size_t zero[1] = {0};
  REFUSED(pinframe_tensor_create(PINFRAME_DTYPE_U8, zero, 1, PINFRAME_MEMORY_HEAP, &t),
          PINFRAME_ERROR_INVALID_INPUT, "");
  REFUSED(pinframe_tensor_image(UINT32_MAX, UINT32_MAX, PINFRAME_FORMAT_RGBA, PINFRAME_DTYPE_F64,
                                PINFRAME_MEMORY_HEAP, &t),
          PINFRAME_ERROR_INVALID_INPUT, "");
  REFUSED(pinframe_tensor_image(0, 8, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8,
                                PINFRAME_MEMORY_HEAP, &t),
          PINFRAME_ERROR_INVALID_INPUT, "");
  CHECK(t == NULL);
  pinframe_layout l;
  l.struct_size = sizeof l;
  REFUSED(pinframe_layout_init(&l, 8, 8, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8, 0),
          PINFRAME_ERROR_INVALID_INPUT, "");
  REFUSED(pinframe_layout_init(&l, 8, 8, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8, 3),
          PINFRAME_ERROR_INVALID_INPUT, "");
  REFUSED(pinframe_layout_init(&l, 8, 8, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8,
                               (SIZE_MAX >> 1) + 1),
          PINFRAME_ERROR_INVALID_INPUT, "");
  REFUSED(pinframe_layout_init(&l, UINT32_MAX, UINT32_MAX, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8,
                               1),
          PINFRAME_ERROR_INVALID_INPUT, "");
  l = layout_of(8, 8, PINFRAME_FORMAT_NV12, PINFRAME_DTYPE_U8);
  pinframe_layout bl = l;
  bl.planes[1].offset = SIZE_MAX - 8;
  REFUSED(pinframe_tensor_with_layout(&bl, PINFRAME_MEMORY_HEAP, &t),
          PINFRAME_ERROR_INVALID_INPUT, "");
  bl = l;
  bl.planes[0].stride = SIZE_MAX;
  REFUSED(pinframe_tensor_with_layout(&bl, PINFRAME_MEMORY_HEAP, &t),
          PINFRAME_ERROR_INVALID_INPUT, "");
  bl = l;
  bl.plane_count = UINT32_MAX;
  REFUSED(pinframe_tensor_with_layout(&bl, PINFRAME_MEMORY_HEAP, &t),
          PINFRAME_ERROR_INVALID_INPUT, "plane_count");
  bl = l;
  bl.planes[1].buffer = SIZE_MAX; /* a buffer count of SIZE_MAX + 1 would wrap to 0 */
  REFUSED(pinframe_tensor_with_layout(&bl, PINFRAME_MEMORY_HEAP, &t),
          PINFRAME_ERROR_INVALID_INPUT, "an image has at most 3 buffers");
  bl = l;
  bl.planes[1].buffer = 3;
  REFUSED(pinframe_tensor_with_layout(&bl, PINFRAME_MEMORY_HEAP, &t),
          PINFRAME_ERROR_INVALID_INPUT, "plane 1 is in buffer 3");
  CHECK(t == NULL);
  OK(pinframe_tensor_image(8, 8, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_SHM,
                           &t));
  int fd = -1;
  REFUSED(pinframe_tensor_get_fd(t, SIZE_MAX, &fd), PINFRAME_ERROR_INVALID_INPUT,
          "does not exist");
  void *data = NULL;
  size_t len = 0;
  OK(pinframe_tensor_map(t, PINFRAME_ACCESS_READ, &data, &len));
  REFUSED(pinframe_tensor_get_mapped_buffer(t, SIZE_MAX, &data, &len),
          PINFRAME_ERROR_INVALID_INPUT, "does not exist");
  OK(pinframe_tensor_unmap(t));
  pinframe_tensor *imported = NULL;
  REFUSED(pinframe_tensor_import(INT32_MAX, &l, &imported), PINFRAME_ERROR_INVALID_INPUT, "");
  REFUSED(pinframe_tensor_import(INT32_MIN, &l, &imported), PINFRAME_ERROR_INVALID_INPUT, "");
  REFUSED(pinframe_tensor_import_planes(&fd, SIZE_MAX, &l, &imported),
          PINFRAME_ERROR_INVALID_INPUT, "fds given");
  REFUSED(pinframe_tensor_map(t, UINT32_MAX, &data, &len), PINFRAME_ERROR_INVALID_INPUT,
          "unknown access");

  /* Conversion options: huge, NaN, infinite and zero values. */
  pinframe_processor *proc = NULL;
  OK(pinframe_processor_create(PINFRAME_BACKEND_CPU, &proc));
  pinframe_tensor *src = gradient(8, 8), *dst = NULL;
  OK(pinframe_tensor_image(4, 4, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_F32, PINFRAME_MEMORY_HEAP,
                           &dst));
  pinframe_convert_options o;
  o.struct_size = sizeof o;
#define BAD_OPTION(set, needle)                                                        \
  do {                                                                                 \
    OK(pinframe_convert_options_init(&o));                                             \
    set;                                                                               \
    REFUSED(pinframe_processor_convert(proc, src, dst, &o, NULL),                      \
            PINFRAME_ERROR_INVALID_INPUT, needle);                                     \
  } while (0)
  BAD_OPTION(o.rotation = UINT32_MAX, "");
  BAD_OPTION(o.rotation = 45, "");
  BAD_OPTION((o.has_crop = 1, o.crop.x = UINT32_MAX, o.crop.y = UINT32_MAX,
              o.crop.width = UINT32_MAX, o.crop.height = UINT32_MAX), "");
  BAD_OPTION((o.has_crop = 1, o.crop.x = 4, o.crop.width = UINT32_MAX - 2, o.crop.height = 2),
             "");
  BAD_OPTION((o.has_crop = 1, o.crop.width = 0, o.crop.height = 0), "");
  BAD_OPTION(o.has_crop = UINT32_MAX, "has_crop");
  BAD_OPTION(o.std[0] = 0.0f, "");
  BAD_OPTION(o.std[1] = NAN, "");
  BAD_OPTION(o.std[2] = INFINITY, "");
  BAD_OPTION(o.mean[0] = NAN, "");
  BAD_OPTION(o.mean[1] = -INFINITY, "");
  BAD_OPTION(o.fit = UINT32_MAX, "unknown fit");
  BAD_OPTION(o.flip = UINT32_MAX, "unknown flip");
  BAD_OPTION(o.interpolation = UINT32_MAX, "unknown interpolation");
  BAD_OPTION(o.matrix = UINT32_MAX, "unknown matrix");
  BAD_OPTION(o.gamma = UINT32_MAX, "unknown gamma");
#undef BAD_OPTION
  OK(pinframe_tensor_free(src));
  OK(pinframe_tensor_free(dst));
  OK(pinframe_tensor_free(t));
  OK(pinframe_processor_free(proc));
  REFUSED(pinframe_processor_create(UINT32_MAX, &proc), PINFRAME_ERROR_INVALID_INPUT,
          "unknown backend");
  CHECK(strcmp(pinframe_status_name(INT32_MIN), "not a pinframe status") == 0);
  CHECK(pinframe_format_name(UINT32_MAX) == NULL);
}

int main(int argc, char **argv) {
  if (argc > 1) check_only = argv[1];
  RUN(version_and_info);
  RUN(status_names_and_last_error);
  RUN(format_names);
  RUN(tensor_create_and_info);
  RUN(tensor_image_and_layouts);
  RUN(set_layout_addresses_a_tile);
  RUN(map_unmap_and_mapped_buffers);
  RUN(fds_and_imports);
  RUN(import_planes_of_two_fds);
  RUN(pins_outlive_their_tensor);
  RUN(processors);
  RUN(raw_bayer_with_isp_options);
  RUN(synthetic_camera_and_frames);
  RUN(camera_errors);
  RUN(guard_entry_points);
  RUN(struct_sizes_are_released_layouts);
  RUN(overlapping_src_and_dst_are_refused);
  RUN(a_pinned_frame_is_not_requeued);
  RUN(bad_numbers_are_refused);
  SUMMARY();
  return 0;
}
