/* Every function of megrt_c.h on a training artifact: loading from a path
 * and from bytes, signatures, runs, parameters and state, and the status
 * and message of each kind of failure.
 *
 *   capi_test MODEL.megc TMP_DIR   (prints "capi: ok" on success) */
#include "megrt/megrt_c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define EXPECT(condition)                                                      \
  do {                                                                         \
    if (!(condition)) {                                                        \
      fprintf(stderr, "%s:%d: expected %s (last error: %s)\n", __FILE__,       \
              __LINE__, #condition, megrt_last_error());                       \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

static int contains(const char *text, const char *part) {
  return strstr(text, part) != NULL;
}

static void *readFile(const char *path, size_t *size) {
  FILE *file = fopen(path, "rb");
  void *data;
  long length;
  if (!file)
    return NULL;
  fseek(file, 0, SEEK_END);
  length = ftell(file);
  fseek(file, 0, SEEK_SET);
  data = malloc((size_t)length);
  *size = fread(data, 1, (size_t)length, file);
  fclose(file);
  return data;
}

/* Whether two files hold the same bytes. */
static int same_file(const char *a, const char *b) {
  size_t sizeA = 0, sizeB = 0;
  void *dataA = readFile(a, &sizeA), *dataB = readFile(b, &sizeB);
  int same =
      dataA && dataB && sizeA == sizeB && memcmp(dataA, dataB, sizeA) == 0;
  free(dataA);
  free(dataB);
  return same;
}

/* The train_step batch: ids i % 7 for both inputs. */
static int32_t ids[2 * 16];
static const int64_t idsShape[2] = {2, 16};

static float trainStep(megrt_session *session) {
  megrt_tensor inputs[2] = {
      {"input_ids", MEGRT_I32, 2, idsShape, ids, sizeof ids},
      {"labels", MEGRT_I32, 2, idsShape, ids, sizeof ids}};
  megrt_outputs *outputs = NULL;
  megrt_tensor loss, nonfinite;
  float value = -1.0f;
  EXPECT(megrt_session_run(session, "train_step", inputs, 2, &outputs) ==
         MEGRT_OK);
  /* The loss, and how many of it (and the gradient norm) were non-finite:
     the step's update ran only if none was. */
  EXPECT(megrt_outputs_count(outputs) == 2);
  EXPECT(megrt_outputs_find(outputs, "nonfinite", &nonfinite) == MEGRT_OK);
  EXPECT(nonfinite.data && *(const float *)nonfinite.data == 0.0f);
  EXPECT(megrt_outputs_find(outputs, "loss", &loss) == MEGRT_OK);
  if (loss.data)
    value = *(const float *)loss.data;
  EXPECT(megrt_outputs_find(outputs, "nope", &loss) == MEGRT_RUNTIME_ERROR);
  EXPECT(contains(megrt_last_error(), "no output named 'nope'"));
  megrt_outputs_destroy(outputs);
  return value;
}

int main(int argc, char **argv) {
  megrt_program *program = NULL, *fromBytes = NULL;
  megrt_session *session = NULL, *restored = NULL;
  megrt_outputs *outputs = NULL;
  megrt_tensor spec, output;
  size_t numInputs = 0, numOutputs = 0, size = 0, i;
  char state[4096], async_state[4096], params[4096], trace[4096];
  float norm[32], ones[32], first, second;
  void *bytes;

  if (argc != 3) {
    fprintf(stderr, "usage: capi_test MODEL.megc TMP_DIR\n");
    return 2;
  }
  for (i = 0; i < 2 * 16; ++i)
    ids[i] = (int32_t)(i % 7);
  snprintf(state, sizeof state, "%s/state.safetensors", argv[2]);
  snprintf(params, sizeof params, "%s/params.safetensors", argv[2]);
  snprintf(async_state, sizeof async_state, "%s/async_state.safetensors",
           argv[2]);
  EXPECT(strcmp(megrt_last_error(), "") == 0);

  /* Programs. */
  EXPECT(megrt_program_load(argv[1], &program) == MEGRT_OK);
  bytes = readFile(argv[1], &size);
  EXPECT(bytes != NULL);
  EXPECT(megrt_program_from_bytes(bytes, size, &fromBytes) == MEGRT_OK);
  free(bytes);
  EXPECT(megrt_program_entry_count(fromBytes) == 4);
  EXPECT(strcmp(megrt_program_entry_name(fromBytes, 3), "train_step") == 0);
  EXPECT(megrt_program_entry_name(fromBytes, 4) == NULL);
  megrt_program_destroy(fromBytes);
  EXPECT(megrt_program_entry_arity(program, "forward", &numInputs,
                                   &numOutputs) == MEGRT_OK);
  EXPECT(numInputs == 1 && numOutputs == 1);
  EXPECT(megrt_program_entry_input(program, "forward", 0, &spec) == MEGRT_OK);
  EXPECT(strcmp(spec.name, "input_ids") == 0 && spec.dtype == MEGRT_I32);
  EXPECT(spec.rank == 2 && spec.shape[0] == 2 && spec.shape[1] == 16);
  EXPECT(spec.data == NULL && spec.size_bytes == sizeof ids);
  EXPECT(megrt_program_entry_output(program, "forward", 0, &spec) == MEGRT_OK);
  EXPECT(strcmp(spec.name, "logits") == 0 && spec.dtype == MEGRT_F32);
  EXPECT(megrt_program_entry_input(program, "forward", 1, &spec) ==
         MEGRT_RUNTIME_ERROR);
  EXPECT(contains(megrt_last_error(), "entry 'forward' has 1 inputs"));

  /* Failures: status and message. */
  EXPECT(megrt_program_load(NULL, &fromBytes) == MEGRT_INVALID_ARGUMENT);
  EXPECT(contains(megrt_last_error(), "megrt_program_load: path is NULL"));
  EXPECT(megrt_program_load("/nonexistent.megc", &fromBytes) ==
         MEGRT_RUNTIME_ERROR);
  EXPECT(contains(megrt_last_error(), "/nonexistent.megc"));
  EXPECT(megrt_program_from_bytes("junk", 4, &fromBytes) ==
         MEGRT_RUNTIME_ERROR);
  EXPECT(megrt_session_create(program, "tpu", 0, &session) ==
         MEGRT_RUNTIME_ERROR);
  EXPECT(contains(megrt_last_error(), "tpu"));

  /* Runs and parameters. */
  EXPECT(megrt_session_create(program, "cpu", 3, &session) == MEGRT_OK);
  {
    megrt_tensor input = {"input_ids", MEGRT_I32, 2, idsShape, ids, 8};
    EXPECT(megrt_session_run(session, "forward", &input, 1, &outputs) ==
           MEGRT_RUNTIME_ERROR);
    input.size_bytes = sizeof ids;
    input.dtype = (megrt_dtype)9;
    EXPECT(megrt_session_run(session, "forward", &input, 1, &outputs) ==
           MEGRT_INVALID_ARGUMENT);
    EXPECT(contains(megrt_last_error(), "dtype 9 is not a megrt_dtype"));
    input.dtype = MEGRT_I32;
    EXPECT(megrt_session_run(session, "forward", NULL, 0, &outputs) ==
           MEGRT_RUNTIME_ERROR);
    EXPECT(contains(megrt_last_error(), "missing input 'input_ids'"));
    EXPECT(megrt_session_run(session, "forward", &input, 1, &outputs) ==
           MEGRT_OK);
    EXPECT(megrt_outputs_get(outputs, 0, &output) == MEGRT_OK);
    EXPECT(strcmp(output.name, "logits") == 0 && output.rank == 3);
    EXPECT(megrt_outputs_get(outputs, 1, &output) == MEGRT_RUNTIME_ERROR);
    megrt_outputs_destroy(outputs);
  }
  EXPECT(megrt_session_read_parameter(session, "model.norm.weight", norm,
                                      sizeof norm) == MEGRT_OK);
  EXPECT(megrt_session_read_parameter(session, "model.norm.weight", norm, 4) ==
         MEGRT_RUNTIME_ERROR);
  EXPECT(megrt_session_read_parameter(session, "nope", norm, 4) ==
         MEGRT_RUNTIME_ERROR);
  EXPECT(contains(megrt_last_error(), "unknown parameter 'nope'"));
  for (i = 0; i < 32; ++i)
    ones[i] = 1.0f;
  {
    const int64_t shape[1] = {32};
    megrt_tensor value = {NULL, MEGRT_F32, 1, shape, ones, sizeof ones};
    EXPECT(megrt_session_write_parameter(session, "model.norm.weight",
                                         &value) == MEGRT_OK);
    EXPECT(megrt_session_read_parameter(session, "model.norm.weight", norm,
                                        sizeof norm) == MEGRT_OK);
    EXPECT(norm[0] == 1.0f && norm[31] == 1.0f);
  }
  EXPECT(megrt_session_init_parameters(session, 3) == MEGRT_OK);

  /* Training state: a session restored after one step continues exactly. */
  trainStep(session);
  EXPECT(megrt_session_save_state(session, state) == MEGRT_OK);
  EXPECT(megrt_session_save_parameters(session, params) == MEGRT_OK);
  first = trainStep(session);
  EXPECT(megrt_session_create(program, "cpu", 0, &restored) == MEGRT_OK);
  EXPECT(megrt_session_load_parameters(restored, params, 0) == MEGRT_OK);
  EXPECT(megrt_session_load_state(restored, state) == MEGRT_OK);
  second = trainStep(restored);
  EXPECT(first == second && first > 0.0f);
  /* The same state saved while the session trains on. */
  {
    megrt_session *again = NULL;
    EXPECT(megrt_session_create(program, "cpu", 0, &again) == MEGRT_OK);
    EXPECT(megrt_session_load_state(again, state) == MEGRT_OK);
    EXPECT(megrt_session_start_save_state(again, async_state) == MEGRT_OK);
    EXPECT(trainStep(again) == first);
    EXPECT(megrt_session_finish_save(again) == MEGRT_OK);
    EXPECT(megrt_session_finish_save(again) == MEGRT_OK);
    EXPECT(same_file(state, async_state));
    megrt_session_destroy(again);
  }
  EXPECT(megrt_session_load_parameters(restored, state, 0) == MEGRT_OK);
  EXPECT(megrt_session_load_state(restored, params) == MEGRT_RUNTIME_ERROR);
  EXPECT(contains(megrt_last_error(), "missing parameter"));

  /* From a checkpoint: the weights come from the file without being
   * initialised first, the state from its init; it trains as a session
   * that loaded the same file. A missing file creates no session. */
  {
    megrt_session *loaded = NULL, *reference = NULL, *missing = NULL;
    EXPECT(megrt_session_create_from_checkpoint(
               program, "cpu", 0, 1, NULL, 0, params, 0, &loaded) == MEGRT_OK);
    EXPECT(megrt_session_create(program, "cpu", 0, &reference) == MEGRT_OK);
    EXPECT(megrt_session_load_parameters(reference, params, 0) == MEGRT_OK);
    EXPECT(loaded != NULL && trainStep(loaded) == trainStep(reference));
    EXPECT(megrt_session_create_from_checkpoint(
               program, "cpu", 0, 1, NULL, 0, "/nonexistent.safetensors", 0,
               &missing) == MEGRT_RUNTIME_ERROR);
    EXPECT(missing == NULL);
    EXPECT(
        contains(megrt_last_error(), "cannot open '/nonexistent.safetensors'"));
    megrt_session_destroy(loaded);
    megrt_session_destroy(reference);
  }

  /* Options: graph regions run command by command train the same; a trace
   * is written on request. */
  {
    megrt_session *plain = NULL;
    FILE *file;
    snprintf(trace, sizeof trace, "%s/trace.json", argv[2]);
    EXPECT(megrt_session_create_with_options(program, "cpu", 3, 0, trace, 2,
                                             &plain) == MEGRT_OK);
    EXPECT(megrt_session_init_parameters(restored, 3) == MEGRT_OK);
    EXPECT(trainStep(plain) == trainStep(restored));
    EXPECT(megrt_session_write_trace(plain) == MEGRT_OK);
    file = fopen(trace, "r");
    EXPECT(file != NULL && fgetc(file) == '{');
    if (file)
      fclose(file);
    /* Clearing drops the events so far; a session without a trace says
     * so. */
    EXPECT(megrt_session_clear_trace(plain) == MEGRT_OK);
    EXPECT(megrt_session_clear_trace(restored) == MEGRT_RUNTIME_ERROR);
    EXPECT(contains(megrt_last_error(), "clearTrace: tracing is off"));
    megrt_session_destroy(plain);
  }

  megrt_session_destroy(restored);
  megrt_session_destroy(session);
  megrt_program_destroy(program);
  if (failures)
    return 1;
  printf("capi: ok\n");
  return 0;
}
