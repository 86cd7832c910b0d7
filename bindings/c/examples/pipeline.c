/* pinframe from C: the main job. A camera (the synthetic one, or /dev/videoN) feeds
 * frames; each is letterboxed into a 320x320 planar float tensor that was pinned once,
 * and read through the pin between sync_for_cpu and sync_for_device, as an inference
 * runtime would. Checks what it reads (it is also a test of scripts/lanes/c):
 *   - the first frame converted 1:1 to RGB equals an independent C reference of the
 *     BT.601 limited-range YUYV -> RGB conversion, within 1;
 *   - the pin and a mapping of the destination are the same memory (no copy);
 *   - the letterbox padding reads exactly pad/255, the content lies inside [0, 1].
 *
 *   cc pipeline.c $(pkg-config --cflags --libs pinframe) -o pipeline
 *   ./pipeline [FRAMES] [/dev/videoN]
 *
 * Builds as C99 and as C++17. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pinframe.h>

#define DIE_UNLESS_OK(call)                                                            \
  do {                                                                                 \
    pinframe_status s_ = (call);                                                       \
    if (s_ != PINFRAME_OK) {                                                           \
      fprintf(stderr, "pipeline: %s: %s: %s\n", #call, pinframe_status_name(s_),       \
              pinframe_last_error());                                                  \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

#define EXPECT(cond)                                                                   \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      fprintf(stderr, "pipeline: %s:%d: expected %s\n", __FILE__, __LINE__, #cond);    \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

enum { DST = 320 };

static int clamp255(double v) {
  long r = lround(v);
  return r < 0 ? 0 : (r > 255 ? 255 : (int)r);
}

/* YUYV -> RGB, BT.601 limited range, computed here from the standard's constants. */
static void reference_rgb(const uint8_t *row, uint32_t x, int rgb[3]) {
  const double kr = 0.299, kb = 0.114, kg = 1.0 - kr - kb;
  const double ys = 255.0 / 219.0, cs = 255.0 / 224.0;
  const double y = ys * (row[2 * x] - 16.0);
  const double u = cs * (row[4 * (x / 2) + 1] - 128.0);
  const double v = cs * (row[4 * (x / 2) + 3] - 128.0);
  rgb[0] = clamp255(y + 2.0 * (1.0 - kr) * v);
  rgb[1] = clamp255(y - 2.0 * (1.0 - kb) * kb / kg * u - 2.0 * (1.0 - kr) * kr / kg * v);
  rgb[2] = clamp255(y + 2.0 * (1.0 - kb) * u);
}

/* The first frame, converted 1:1 into RGB, against the reference. */
static void check_against_reference(pinframe_processor *proc, const pinframe_tensor *src) {
  pinframe_layout layout;
  layout.struct_size = sizeof layout;
  DIE_UNLESS_OK(pinframe_tensor_get_layout(src, &layout));
  EXPECT(layout.format == PINFRAME_FORMAT_YUYV);
  pinframe_tensor *rgb = NULL;
  DIE_UNLESS_OK(pinframe_tensor_image(layout.width, layout.height, PINFRAME_FORMAT_RGB,
                                      PINFRAME_DTYPE_U8, PINFRAME_MEMORY_HEAP, &rgb));
  DIE_UNLESS_OK(pinframe_processor_convert(proc, src, rgb, NULL, NULL));

  void *src_data = NULL, *rgb_data = NULL;
  size_t src_len = 0, rgb_len = 0;
  DIE_UNLESS_OK(pinframe_tensor_map(src, PINFRAME_ACCESS_READ, &src_data, &src_len));
  DIE_UNLESS_OK(pinframe_tensor_map(rgb, PINFRAME_ACCESS_READ, &rgb_data, &rgb_len));
  EXPECT(rgb_len == (size_t)layout.width * layout.height * 3);
  int worst = 0;
  for (uint32_t y = 0; y < layout.height; y++) {
    const uint8_t *row = (const uint8_t *)src_data + layout.planes[0].offset +
                         (size_t)y * layout.planes[0].stride;
    const uint8_t *out = (const uint8_t *)rgb_data + (size_t)y * layout.width * 3;
    for (uint32_t x = 0; x < layout.width; x++) {
      int ref[3];
      reference_rgb(row, x, ref);
      for (int c = 0; c < 3; c++) {
        int d = abs((int)out[3 * x + c] - ref[c]);
        if (d > worst) worst = d;
      }
    }
  }
  DIE_UNLESS_OK(pinframe_tensor_unmap(rgb));
  DIE_UNLESS_OK(pinframe_tensor_unmap(src));
  DIE_UNLESS_OK(pinframe_tensor_free(rgb));
  printf("first frame vs the C reference: largest difference %d\n", worst);
  EXPECT(worst <= 1);
}

int main(int argc, char **argv) {
  const int frames = argc > 1 ? atoi(argv[1]) : 30;
  const char *device = argc > 2 ? argv[2] : NULL;
  EXPECT(frames > 0);

  pinframe_camera_config config;
  config.struct_size = sizeof config;
  DIE_UNLESS_OK(pinframe_camera_config_init(&config));
  config.width = 640;
  config.height = 480;
  config.format = PINFRAME_FORMAT_YUYV;
  pinframe_camera *camera = NULL;
  if (device != NULL) {
    DIE_UNLESS_OK(pinframe_camera_open(device, &config, &camera));
  } else {
    DIE_UNLESS_OK(pinframe_camera_synthetic(&config, &camera));
  }

  pinframe_processor *proc = NULL;
  const char *backend = getenv("PINFRAME_C_BACKEND");
  DIE_UNLESS_OK(pinframe_processor_create(
      backend != NULL && strcmp(backend, "gl") == 0 ? PINFRAME_BACKEND_GL : PINFRAME_BACKEND_CPU,
      &proc));

  /* The destination, pinned once: an inference runtime would get address/len here. Device
   * memory first: the GL backend renders into a dma-buf without a readback. */
  pinframe_tensor *dst = NULL;
  DIE_UNLESS_OK(pinframe_tensor_image(DST, DST, PINFRAME_FORMAT_PLANAR_RGB, PINFRAME_DTYPE_F32,
                                      PINFRAME_MEMORY_DEVICE, &dst));
  pinframe_pin *pin = NULL;
  DIE_UNLESS_OK(pinframe_tensor_pin(dst, &pin));
  void *address = NULL;
  size_t len = 0, alignment = 0;
  DIE_UNLESS_OK(pinframe_pin_get_data(pin, &address, &len, &alignment));
  EXPECT(len == (size_t)3 * DST * DST * sizeof(float));
  EXPECT(alignment >= 64);
  {
    void *mapped = NULL;
    size_t mapped_len = 0;
    DIE_UNLESS_OK(pinframe_tensor_map(dst, PINFRAME_ACCESS_READ, &mapped, &mapped_len));
    EXPECT(mapped == address); /* one buffer, one mapping: the pin is no copy */
    DIE_UNLESS_OK(pinframe_tensor_unmap(dst));
  }

  pinframe_convert_options options;
  options.struct_size = sizeof options;
  DIE_UNLESS_OK(pinframe_convert_options_init(&options));
  options.fit = PINFRAME_FIT_LETTERBOX;
  options.pad[0] = options.pad[1] = options.pad[2] = 114;

  const float *planes = (const float *)address;
  double mean[3] = {0, 0, 0};
  for (int i = 0; i < frames; i++) {
    pinframe_frame *frame = NULL;
    DIE_UNLESS_OK(pinframe_camera_next_frame(camera, -1, &frame));
    const pinframe_tensor *src = NULL;
    DIE_UNLESS_OK(pinframe_frame_get_tensor(frame, &src));
    if (i == 0) check_against_reference(proc, src);

    pinframe_convert_info info;
    info.struct_size = sizeof info;
    DIE_UNLESS_OK(pinframe_processor_convert(proc, src, dst, &options, &info));
    EXPECT(info.content[0] == 0 && info.content[1] == 40);
    EXPECT(info.content[2] == DST && info.content[3] == 240);

    /* "Inference": read the pinned tensor in place. */
    DIE_UNLESS_OK(pinframe_tensor_sync_for_cpu(dst, PINFRAME_ACCESS_READ));
    for (int c = 0; c < 3; c++) {
      const float *plane = planes + (size_t)c * DST * DST;
      double sum = 0;
      for (uint32_t y = 0; y < DST; y++) {
        for (uint32_t x = 0; x < DST; x++) {
          const float v = plane[y * DST + x];
          const int padding = y < info.content[1] || y >= info.content[1] + info.content[3];
          if (padding) {
            EXPECT(fabsf(v - 114.0f / 255.0f) < 1e-6f);
          } else {
            EXPECT(v >= 0.0f && v <= 1.0f);
            sum += v;
          }
        }
      }
      mean[c] = sum / ((double)info.content[2] * info.content[3]);
    }
    DIE_UNLESS_OK(pinframe_tensor_sync_for_device(dst, PINFRAME_ACCESS_READ));
    DIE_UNLESS_OK(pinframe_frame_release(frame));
  }

  pinframe_processor_stats stats;
  stats.struct_size = sizeof stats;
  DIE_UNLESS_OK(pinframe_processor_get_stats(proc, &stats));
  EXPECT(stats.frames == (uint64_t)frames + 1);
  printf("frames: %d, last frame's content means R %.3f G %.3f B %.3f\n", frames, mean[0],
         mean[1], mean[2]);

  DIE_UNLESS_OK(pinframe_pin_free(pin));
  DIE_UNLESS_OK(pinframe_tensor_free(dst));
  DIE_UNLESS_OK(pinframe_processor_free(proc));
  DIE_UNLESS_OK(pinframe_camera_free(camera));
  return 0;
}
