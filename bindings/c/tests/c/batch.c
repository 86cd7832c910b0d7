/* Batches through the C API (scripts/lanes/c): pinframe_tensor_image_batch,
 * pinframe_tensor_get_batch_len and pinframe_processor_convert_batch. Every slice of a
 * batch of three crops of one frame equals, byte for byte, pinframe_processor_convert of
 * the same crop into a single image; fewer items leave the other slices alone; every
 * error is found before anything is written. C99 and C++17. */
#include <stdint.h>

#include "check.h"

enum { FW = 320, FH = 240, SW = 48, SH = 40, SLICES = 4 };

/* An NV12 frame of deterministic bytes (an LCG, smoothed along rows). */
static pinframe_tensor *nv12_frame(void) {
  pinframe_tensor *t = NULL;
  OK(pinframe_tensor_image(FW, FH, PINFRAME_FORMAT_NV12, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_HEAP,
                           &t));
  void *p = NULL;
  size_t len = 0;
  OK(pinframe_tensor_map(t, PINFRAME_ACCESS_WRITE, &p, &len));
  uint32_t state = 12345u;
  unsigned acc = 128;
  for (size_t i = 0; i < len; i++) {
    state = state * 1664525u + 1013904223u;
    acc = (acc * 3 + (state >> 24)) / 4;
    ((unsigned char *)p)[i] = (unsigned char)(i % 7 == 0 ? (state >> 24) : acc);
  }
  OK(pinframe_tensor_unmap(t));
  return t;
}

static void fill(pinframe_tensor *t, unsigned char value) {
  void *p = NULL;
  size_t len = 0;
  OK(pinframe_tensor_map(t, PINFRAME_ACCESS_WRITE, &p, &len));
  memset(p, value, len);
  OK(pinframe_tensor_unmap(t));
}

/* Every byte of `t` from `from` on is `value`. */
static int all_bytes_from(pinframe_tensor *t, size_t from, unsigned char value) {
  void *p = NULL;
  size_t len = 0;
  OK(pinframe_tensor_map(t, PINFRAME_ACCESS_READ, &p, &len));
  int same = 1;
  for (size_t i = from; i < len; i++) same &= ((unsigned char *)p)[i] == value;
  OK(pinframe_tensor_unmap(t));
  return same;
}

static pinframe_batch_item item(const pinframe_tensor *src, uint32_t x, uint32_t y, uint32_t w,
                                uint32_t h) {
  pinframe_batch_item it;
  it.struct_size = sizeof it;
  OK(pinframe_batch_item_init(&it));
  CHECK(it.src == NULL && it.has_crop == 0 && it.has_fit == 0);
  it.src = src;
  it.has_crop = 1;
  it.crop.x = x;
  it.crop.y = y;
  it.crop.width = w;
  it.crop.height = h;
  return it;
}

static pinframe_convert_options imagenet(void) {
  pinframe_convert_options o;
  o.struct_size = sizeof o;
  OK(pinframe_convert_options_init(&o));
  const float mean[3] = {0.485f, 0.456f, 0.406f}, std_[3] = {0.229f, 0.224f, 0.225f};
  memcpy(o.mean, mean, sizeof mean);
  memcpy(o.std, std_, sizeof std_);
  return o;
}

static void batch_tensors(void) {
  pinframe_tensor *b = NULL;
  OK(pinframe_tensor_image_batch(SLICES, SW, SH, PINFRAME_FORMAT_PLANAR_RGB, PINFRAME_DTYPE_F32,
                                 PINFRAME_MEMORY_HEAP, &b));
  size_t n = 0;
  OK(pinframe_tensor_get_batch_len(b, &n));
  CHECK(n == SLICES);
  pinframe_tensor_info info;
  info.struct_size = sizeof info;
  OK(pinframe_tensor_get_info(b, &info));
  CHECK(info.ndim == 4 && info.shape[0] == SLICES && info.shape[1] == 3 && info.shape[2] == SH &&
        info.shape[3] == SW && info.has_layout == 1);
  CHECK(info.buffer_len[0] >= (size_t)SLICES * 3 * SW * SH * sizeof(float));
  pinframe_layout layout;
  layout.struct_size = sizeof layout;
  OK(pinframe_tensor_get_layout(b, &layout));
  CHECK(layout.width == SW && layout.height == SH); /* slice 0's */

  pinframe_tensor *one = NULL;
  OK(pinframe_tensor_image(SW, SH, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8, PINFRAME_MEMORY_HEAP,
                           &one));
  OK(pinframe_tensor_get_batch_len(one, &n));
  CHECK(n == 1);
  /* set_layout makes a batch one image. */
  OK(pinframe_tensor_set_layout(b, &layout));
  OK(pinframe_tensor_get_batch_len(b, &n));
  CHECK(n == 1);

  pinframe_tensor *none = (pinframe_tensor *)(void *)&info;
  FAILS(pinframe_tensor_image_batch(0, SW, SH, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8,
                                    PINFRAME_MEMORY_HEAP, &none),
        PINFRAME_ERROR_INVALID_INPUT, "at least one image");
  CHECK(none == NULL);
  NULL_ARG(pinframe_tensor_image_batch(2, SW, SH, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8,
                                       PINFRAME_MEMORY_HEAP, NULL),
           "out");
  NULL_ARG(pinframe_tensor_get_batch_len(NULL, &n), "tensor");
  NULL_ARG(pinframe_tensor_get_batch_len(one, NULL), "len");
  OK(pinframe_tensor_free(one));
  OK(pinframe_tensor_free(b));
}

/* Three crops of one frame (the top-left corner, the bottom-right corner letterboxed, a
 * full-height strip at the right edge) into a batch of four planar f32 slices with
 * ImageNet normalisation: each slice equals pinframe_processor_convert of its crop, and
 * slice 3 keeps its bytes. */
static void slices_equal_single_conversions(void) {
  pinframe_processor *proc = NULL;
  OK(pinframe_processor_create(PINFRAME_BACKEND_CPU, &proc));
  pinframe_tensor *frame = nv12_frame();
  pinframe_tensor *batch = NULL;
  OK(pinframe_tensor_image_batch(SLICES, SW, SH, PINFRAME_FORMAT_PLANAR_RGB, PINFRAME_DTYPE_F32,
                                 PINFRAME_MEMORY_HEAP, &batch));
  fill(batch, 0x5A);

  pinframe_batch_item items[3];
  items[0] = item(frame, 0, 0, 100, 80);
  items[1] = item(frame, FW - 90, FH - 50, 90, 50);
  items[1].has_fit = 1;
  items[1].fit = PINFRAME_FIT_LETTERBOX;
  items[1].pad[0] = 10;
  items[1].pad[1] = 20;
  items[1].pad[2] = 30;
  items[2] = item(frame, FW - 40, 0, 40, FH);
  pinframe_convert_options opts = imagenet();
  pinframe_convert_info infos[3];
  for (int i = 0; i < 3; i++) infos[i].struct_size = sizeof infos[i];
  OK(pinframe_processor_convert_batch(proc, items, 3, batch, &opts, infos));

  const size_t slice = (size_t)3 * SW * SH * sizeof(float);
  void *bp = NULL;
  size_t blen = 0;
  for (int i = 0; i < 3; i++) {
    pinframe_tensor *single = NULL;
    OK(pinframe_tensor_image(SW, SH, PINFRAME_FORMAT_PLANAR_RGB, PINFRAME_DTYPE_F32,
                             PINFRAME_MEMORY_HEAP, &single));
    pinframe_convert_options o = imagenet();
    o.has_crop = 1;
    o.crop = items[i].crop;
    if (items[i].has_fit) {
      o.fit = items[i].fit;
      memcpy(o.pad, items[i].pad, sizeof o.pad);
    }
    pinframe_convert_info info;
    info.struct_size = sizeof info;
    OK(pinframe_processor_convert(proc, frame, single, &o, &info));
    void *sp = NULL;
    size_t slen = 0;
    OK(pinframe_tensor_map(single, PINFRAME_ACCESS_READ, &sp, &slen));
    OK(pinframe_tensor_map(batch, PINFRAME_ACCESS_READ, &bp, &blen));
    CHECK(slen == slice && blen >= SLICES * slice);
    if (memcmp((unsigned char *)bp + (size_t)i * slice, sp, slice) != 0) {
      fprintf(stderr, "slice %d differs from the single conversion of its crop\n", i);
      exit(1);
    }
    OK(pinframe_tensor_unmap(batch));
    OK(pinframe_tensor_unmap(single));
    CHECK(memcmp(infos[i].scale, info.scale, sizeof info.scale) == 0);
    CHECK(memcmp(infos[i].offset, info.offset, sizeof info.offset) == 0);
    CHECK(memcmp(infos[i].content, info.content, sizeof info.content) == 0);
    CHECK(memcmp(infos[i].dst_to_src, info.dst_to_src, sizeof info.dst_to_src) == 0);
    CHECK(infos[i].matrix == info.matrix && infos[i].range == info.range);
    OK(pinframe_tensor_free(single));
  }
  /* Each info maps its slice back into the frame: slice 2's origin is its crop's. */
  CHECK(infos[2].dst_to_src[0][2] == (double)(FW - 40) && infos[2].dst_to_src[1][2] == 0.0);
  CHECK(infos[1].offset[1] > 0); /* letterboxed: padding above */
  CHECK(all_bytes_from(batch, 3 * slice, 0x5A));

  /* infos may be NULL; one item converts into slice 0 only. */
  fill(batch, 0x5A);
  OK(pinframe_processor_convert_batch(proc, items, 1, batch, NULL, NULL));
  CHECK(all_bytes_from(batch, slice, 0x5A));
  CHECK(!all_bytes_from(batch, 0, 0x5A));

  pinframe_processor_stats stats;
  stats.struct_size = sizeof stats;
  OK(pinframe_processor_get_stats(proc, &stats));
  CHECK(stats.frames == 3 + 3 + 1);

  OK(pinframe_tensor_free(batch));
  OK(pinframe_tensor_free(frame));
  OK(pinframe_processor_free(proc));
}

/* Every refusal leaves the batch as it was. */
static void errors_write_nothing(void) {
  pinframe_processor *proc = NULL;
  OK(pinframe_processor_create(PINFRAME_BACKEND_CPU, &proc));
  pinframe_tensor *frame = nv12_frame();
  pinframe_tensor *batch = NULL;
  OK(pinframe_tensor_image_batch(2, SW, SH, PINFRAME_FORMAT_RGB, PINFRAME_DTYPE_U8,
                                 PINFRAME_MEMORY_HEAP, &batch));
  fill(batch, 0xA5);
  pinframe_batch_item items[3];
  items[0] = item(frame, 0, 0, 64, 64);
  items[1] = item(frame, 10, 10, 64, 64);
  items[2] = item(frame, 20, 20, 64, 64);

  FAILS(pinframe_processor_convert_batch(proc, items, 3, batch, NULL, NULL),
        PINFRAME_ERROR_INVALID_INPUT, "3 items for a batch of 2");
  FAILS(pinframe_processor_convert_batch(proc, items, 0, batch, NULL, NULL),
        PINFRAME_ERROR_INVALID_INPUT, "0 items");
  NULL_ARG(pinframe_processor_convert_batch(NULL, items, 1, batch, NULL, NULL), "processor");
  NULL_ARG(pinframe_processor_convert_batch(proc, NULL, 1, batch, NULL, NULL), "items");
  NULL_ARG(pinframe_processor_convert_batch(proc, items, 1, NULL, NULL, NULL), "dst");

  /* A crop outside the frame, in the second item: the library names the item. */
  pinframe_batch_item bad[2];
  bad[0] = items[0];
  bad[1] = item(frame, FW - 10, 0, 11, 10);
  FAILS(pinframe_processor_convert_batch(proc, bad, 2, batch, NULL, NULL),
        PINFRAME_ERROR_INVALID_INPUT, "batch item 1");
  bad[1] = items[1];
  bad[1].src = NULL;
  NULL_ARG(pinframe_processor_convert_batch(proc, bad, 2, batch, NULL, NULL), "items[1].src");
  bad[1] = items[1];
  bad[1].src = batch;
  FAILS(pinframe_processor_convert_batch(proc, bad, 2, batch, NULL, NULL),
        PINFRAME_ERROR_INVALID_INPUT, "items[1]: src and dst are the same tensor");
  bad[1] = items[1];
  bad[1].has_fit = 2;
  FAILS(pinframe_processor_convert_batch(proc, bad, 2, batch, NULL, NULL),
        PINFRAME_ERROR_INVALID_INPUT, "items[1]: has_fit must be 0 or 1");
  bad[1] = items[1];
  bad[1].has_fit = 1;
  bad[1].fit = 9;
  FAILS(pinframe_processor_convert_batch(proc, bad, 2, batch, NULL, NULL),
        PINFRAME_ERROR_INVALID_INPUT, "items[1]: unknown fit 9");
  bad[1] = items[1];
  bad[1].has_crop = 3;
  FAILS(pinframe_processor_convert_batch(proc, bad, 2, batch, NULL, NULL),
        PINFRAME_ERROR_INVALID_INPUT, "items[1]: has_crop must be 0 or 1");
  bad[1] = items[1];
  bad[1].struct_size = 8;
  FAILS(pinframe_processor_convert_batch(proc, bad, 2, batch, NULL, NULL),
        PINFRAME_ERROR_INVALID_INPUT, "differs from items[0]'s");
  bad[0].struct_size = 12;
  FAILS(pinframe_processor_convert_batch(proc, bad, 2, batch, NULL, NULL),
        PINFRAME_ERROR_INVALID_INPUT, "struct_size 12 is not a size of pinframe_batch_item");
  /* An infos array with a bad entry is refused before converting. */
  pinframe_convert_info infos[2];
  infos[0].struct_size = sizeof infos[0];
  infos[1].struct_size = 3;
  FAILS(pinframe_processor_convert_batch(proc, items, 2, batch, NULL, infos),
        PINFRAME_ERROR_INVALID_INPUT, "infos[1]");
  /* A source mapped for writing. */
  void *p = NULL;
  size_t len = 0;
  OK(pinframe_tensor_map(frame, PINFRAME_ACCESS_WRITE, &p, &len));
  FAILS(pinframe_processor_convert_batch(proc, items, 2, batch, NULL, NULL),
        PINFRAME_ERROR_INVALID_INPUT, "items[0]: the tensor is mapped for writing");
  OK(pinframe_tensor_unmap(frame));
  /* A u16 source. */
  pinframe_tensor *deep = NULL;
  OK(pinframe_tensor_image(8, 8, PINFRAME_FORMAT_GREY, PINFRAME_DTYPE_U16, PINFRAME_MEMORY_HEAP,
                           &deep));
  bad[0] = items[0];
  bad[1] = item(deep, 0, 0, 8, 8);
  FAILS(pinframe_processor_convert_batch(proc, bad, 2, batch, NULL, NULL),
        PINFRAME_ERROR_UNSUPPORTED, "items[1]: conversion sources are u8");
  OK(pinframe_tensor_free(deep));
  /* convert refuses a batch of more than one image. */
  FAILS(pinframe_processor_convert(proc, frame, batch, NULL, NULL), PINFRAME_ERROR_INVALID_INPUT,
        "convert_batch");
  CHECK(all_bytes_from(batch, 0, 0xA5));

  /* The same calls, right, convert. */
  OK(pinframe_processor_convert_batch(proc, items, 2, batch, NULL, NULL));
  CHECK(!all_bytes_from(batch, 0, 0xA5));
  OK(pinframe_tensor_free(batch));
  OK(pinframe_tensor_free(frame));
  OK(pinframe_processor_free(proc));
}

int main(int argc, char **argv) {
  if (argc > 1) check_only = argv[1];
  RUN(batch_tensors);
  RUN(slices_equal_single_conversions);
  RUN(errors_write_nothing);
  SUMMARY();
  return 0;
}
