/* The megrt C API: load megc artifacts and run their entries from C and
 * from other languages' foreign function interfaces. */
#ifndef MEGRT_MEGRT_C_H
#define MEGRT_MEGRT_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every function that can fail returns a status; on failure,
 * megrt_last_error() holds the message, the same text the C++ API's
 * megrt::Error carries (it names the object, what was expected and what
 * was found). */
typedef enum megrt_status {
  MEGRT_OK = 0,
  /* A null handle or pointer, or a dtype outside megrt_dtype. */
  MEGRT_INVALID_ARGUMENT = 1,
  /* What megrt::Error reports: a bad artifact, file, input or device. */
  MEGRT_RUNTIME_ERROR = 2,
  MEGRT_OUT_OF_MEMORY = 3,
  /* Any other failure inside the runtime. */
  MEGRT_INTERNAL_ERROR = 4
} megrt_status;

/* Values equal megrt::DType's. bf16 and f16 elements are the 16-bit
 * patterns. */
typedef enum megrt_dtype {
  MEGRT_F32 = 0,
  MEGRT_BF16 = 1,
  MEGRT_F16 = 2,
  MEGRT_I32 = 3,
  MEGRT_I64 = 4
} megrt_dtype;

/* A named, dense, row-major tensor that the caller or the runtime owns, as
 * each function says. `data` is NULL in the signatures of entries. */
typedef struct megrt_tensor {
  const char *name;
  megrt_dtype dtype;
  size_t rank;
  const int64_t *shape;
  const void *data;
  size_t size_bytes;
} megrt_tensor;

typedef struct megrt_program megrt_program;
typedef struct megrt_session megrt_session;
typedef struct megrt_outputs megrt_outputs;

/* The message of the calling thread's last failure ("" before any); valid
 * until its next call into megrt. */
const char *megrt_last_error(void);

/* Loads and fully verifies an artifact. */
megrt_status megrt_program_load(const char *path, megrt_program **program);
megrt_status megrt_program_from_bytes(const void *data, size_t size,
                                      megrt_program **program);
/* Sessions keep what they need: a program may be destroyed before them. */
void megrt_program_destroy(megrt_program *program);

size_t megrt_program_entry_count(const megrt_program *program);
/* NULL if index is out of range; valid while the program lives. */
const char *megrt_program_entry_name(const megrt_program *program,
                                     size_t index);
/* The signature of an entry: how many inputs and outputs it has, and each
 * one's name, dtype and shape (pointers into the program, data NULL). */
megrt_status megrt_program_entry_arity(const megrt_program *program,
                                       const char *entry, size_t *num_inputs,
                                       size_t *num_outputs);
megrt_status megrt_program_entry_input(const megrt_program *program,
                                       const char *entry, size_t index,
                                       megrt_tensor *spec);
megrt_status megrt_program_entry_output(const megrt_program *program,
                                        const char *entry, size_t index,
                                        megrt_tensor *spec);

/* `device` is "cpu", or "cuda" / "cuda:N" in a runtime built with CUDA
 * support; the parameters are initialised from their init specs with
 * `seed`. */
megrt_status megrt_session_create(const megrt_program *program,
                                  const char *device, uint64_t seed,
                                  megrt_session **session);
/* As megrt_session_create, with `cuda_graphs` zero to run graph regions
 * command by command, `trace` (NULL: none) the path of a Chrome
 * trace-event file with device timings of every command, written by
 * megrt_session_write_trace and when the session is destroyed, and
 * `threads` the session's CPU threads, which a cpu device runs kernels on
 * and any session initialises parameters on (0: the
 * MEGRT_NUM_THREADS environment variable, else every core the process may
 * use). */
megrt_status megrt_session_create_with_options(const megrt_program *program,
                                               const char *device,
                                               uint64_t seed, int cuda_graphs,
                                               const char *trace,
                                               unsigned threads,
                                               megrt_session **session);
/* As megrt_session_create_with_options followed by
 * megrt_session_load_parameters(checkpoint, allow_extra), except that the
 * model weights are not initialised first (the load sets every one; the
 * training state is initialised with `seed`): a large model starts without
 * initialising weights it would throw away. On failure no session is
 * created. */
megrt_status megrt_session_create_from_checkpoint(
    const megrt_program *program, const char *device, uint64_t seed,
    int cuda_graphs, const char *trace, unsigned threads,
    const char *checkpoint, int allow_extra, megrt_session **session);
megrt_status megrt_session_write_trace(megrt_session *session);
/* Drops the trace's events so far (warm-up runs), so that the file holds
 * only later runs; an error when the session has no trace. */
megrt_status megrt_session_clear_trace(megrt_session *session);
void megrt_session_destroy(megrt_session *session);

/* A program with a mesh runs as one process per rank (started by mpirun),
 * each creating its session on the same artifact; save_parameters,
 * save_state and run communicate, so every rank makes the same calls, and
 * rank 0 alone writes checkpoints. The rank of this process and the number
 * of ranks: 0 and 1 without a mesh, -1 for a NULL session. */
int megrt_session_rank(const megrt_session *session);
int megrt_session_world_size(const megrt_session *session);

megrt_status megrt_session_init_parameters(megrt_session *session,
                                           uint64_t seed);
/* Model weights by name from a safetensors file or a Hugging Face model
 * directory (model.safetensors or a sharded index; saving to a directory,
 * or a path ending in '/', writes that layout with config.json and shards
 * of at most 50 GB); `allow_extra` non-zero ignores tensors that are not
 * parameters. Nothing changes on failure. */
megrt_status megrt_session_load_parameters(megrt_session *session,
                                           const char *path, int allow_extra);
megrt_status megrt_session_save_parameters(megrt_session *session,
                                           const char *path);
/* The full training state: weights, optimizer moments and step count. */
megrt_status megrt_session_load_state(megrt_session *session, const char *path);
megrt_status megrt_session_save_state(megrt_session *session, const char *path);
/* save_state while training goes on: returns once the state is copied to
 * host memory; a background thread writes the file (byte for byte what
 * save_state writes). finish_save waits for it and returns its outcome (a
 * session with none in flight: MEGRT_OK); starting another save, saving
 * the state, and destroying the session finish it first. A path that is a
 * directory or ends in '/' takes a distributed checkpoint, the form a
 * program with a mesh saves asynchronously. */
megrt_status megrt_session_start_save_state(megrt_session *session,
                                            const char *path);
megrt_status megrt_session_finish_save(megrt_session *session);
/* Copies a parameter into `buffer`, which must hold exactly its bytes. */
megrt_status megrt_session_read_parameter(megrt_session *session,
                                          const char *name, void *buffer,
                                          size_t size_bytes);
/* `value` (name ignored) must have the parameter's dtype and shape. */
megrt_status megrt_session_write_parameter(megrt_session *session,
                                           const char *name,
                                           const megrt_tensor *value);

/* Runs one entry with exactly its inputs (copied, never modified). On
 * success `*outputs` owns every output; destroy it when done. */
megrt_status megrt_session_run(megrt_session *session, const char *entry,
                               const megrt_tensor *inputs, size_t num_inputs,
                               megrt_outputs **outputs);

size_t megrt_outputs_count(const megrt_outputs *outputs);
/* Views of an output, in name order (or by name); valid until the outputs
 * are destroyed. */
megrt_status megrt_outputs_get(const megrt_outputs *outputs, size_t index,
                               megrt_tensor *tensor);
megrt_status megrt_outputs_find(const megrt_outputs *outputs, const char *name,
                                megrt_tensor *tensor);
void megrt_outputs_destroy(megrt_outputs *outputs);

#ifdef __cplusplus
}
#endif

#endif /* MEGRT_MEGRT_C_H */
