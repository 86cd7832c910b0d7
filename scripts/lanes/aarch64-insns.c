/* A qemu-user TCG plugin that counts the guest instructions a program executes and
 * prints "insns: N" to stderr when it exits. The aarch64 lane (scripts/lanes/aarch64)
 * runs `pinframe bench` with two frame counts under it and divides the difference by
 * the output pixels of the extra frames: instructions per output pixel, the proxy for
 * speed that emulation can give (emulated time is not speed).
 *
 * Hand-written because Debian ships neither QEMU's example plugins (libinsn.so) nor
 * qemu-plugin.h; the few declarations below are those of QEMU's plugin API version 1
 * (QEMU 4.2 to 8.x, Debian 12 has 7.2), which is a stable C ABI.
 *
 * Counting is per translated block: each block adds its instruction count to one
 * 64-bit counter every time it runs (an inline add, no helper call). The adds of two
 * guest threads running at the same moment can race; the lane runs the bench with one
 * rayon thread, so at most one thread converts at a time. */
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
typedef struct qemu_info_t qemu_info_t; /* only passed through */
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };

typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t, struct qemu_plugin_tb *);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t, void *);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, qemu_plugin_vcpu_tb_trans_cb_t);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *, enum qemu_plugin_op,
                                              void *, uint64_t);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, qemu_plugin_udata_cb_t, void *);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *);
void qemu_plugin_outs(const char *);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

static uint64_t executed;

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &executed,
                                             qemu_plugin_tb_n_insns(tb));
}

static void on_exit(qemu_plugin_id_t id, void *data)
{
    char line[64];
    (void)id;
    (void)data;
    snprintf(line, sizeof line, "insns: %" PRIu64 "\n", executed);
    qemu_plugin_outs(line);
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id,
                                                               const qemu_info_t *info,
                                                               int argc, char **argv)
{
    (void)info;
    (void)argc;
    (void)argv;
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_exit, NULL);
    return 0;
}
