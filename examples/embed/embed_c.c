/* Embedding megrt from C: load an artifact, describe an entry, fill its
 * inputs with a fixed pattern, run it for some steps, save the weights, and
 * show how a failure reports itself.
 *
 *   embed_c MODEL.megc ENTRY STEPS PARAMS_OUT.safetensors
 *
 * Element i of every input is i % 7 (integers) or (i % 7) / 8 (f32). */
#include "megrt/megrt_c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check(megrt_status status, const char *what) {
  if (status == MEGRT_OK)
    return 1;
  fprintf(stderr, "embed_c: %s failed (status %d): %s\n", what, (int)status,
          megrt_last_error());
  return 0;
}

/* Allocates and fills the input described by `spec`; NULL for a dtype the
 * pattern does not cover. */
static void *makeInput(const megrt_tensor *spec) {
  size_t count = 1, i;
  void *data;
  for (i = 0; i < spec->rank; ++i)
    count *= (size_t)spec->shape[i];
  data = malloc(spec->size_bytes ? spec->size_bytes : 1);
  for (i = 0; data && i < count; ++i) {
    switch (spec->dtype) {
    case MEGRT_I32:
      ((int32_t *)data)[i] = (int32_t)(i % 7);
      break;
    case MEGRT_I64:
      ((int64_t *)data)[i] = (int64_t)(i % 7);
      break;
    case MEGRT_F32:
      ((float *)data)[i] = (float)(i % 7) / 8.0f;
      break;
    default:
      free(data);
      return NULL;
    }
  }
  return data;
}

int main(int argc, char **argv) {
  megrt_program *program = NULL;
  megrt_session *session = NULL;
  megrt_outputs *outputs = NULL;
  megrt_tensor *inputs = NULL;
  size_t numInputs = 0, numOutputs = 0, i;
  int steps, step, ok = 0;

  if (argc != 5) {
    fprintf(stderr,
            "usage: embed_c MODEL.megc ENTRY STEPS PARAMS_OUT.safetensors\n");
    return 2;
  }
  steps = atoi(argv[3]);
  if (!check(megrt_program_load(argv[1], &program), "loading the artifact") ||
      !check(
          megrt_program_entry_arity(program, argv[2], &numInputs, &numOutputs),
          "describing the entry") ||
      !check(megrt_session_create(program, "cpu", 0, &session),
             "creating the session"))
    goto done;
  printf("entry %s: %zu inputs, %zu outputs\n", argv[2], numInputs, numOutputs);

  /* The input specs point into the program, which stays alive for them. */
  inputs = calloc(numInputs ? numInputs : 1, sizeof(megrt_tensor));
  if (!inputs)
    goto done;
  for (i = 0; i < numInputs; ++i) {
    if (!check(megrt_program_entry_input(program, argv[2], i, &inputs[i]),
               "describing an input"))
      goto done;
    inputs[i].data = makeInput(&inputs[i]);
    if (!inputs[i].data) {
      fprintf(stderr,
              "embed_c: input '%s' has a dtype this example does not "
              "fill\n",
              inputs[i].name);
      goto done;
    }
  }

  for (step = 1; step <= steps; ++step) {
    megrt_outputs_destroy(outputs);
    outputs = NULL;
    if (!check(megrt_session_run(session, argv[2], inputs, numInputs, &outputs),
               "running the entry"))
      goto done;
    printf("step %d", step);
    for (i = 0; i < megrt_outputs_count(outputs); ++i) {
      megrt_tensor output;
      if (!check(megrt_outputs_get(outputs, i, &output), "reading an output"))
        goto done;
      if (output.dtype == MEGRT_F32 && output.rank == 0)
        printf(" %s %.9g", output.name, *(const float *)output.data);
    }
    printf("\n");
  }
  if (!check(megrt_session_save_parameters(session, argv[4]),
             "saving the parameters"))
    goto done;

  /* A failure explains itself and leaves the session usable. */
  {
    megrt_outputs *none = NULL;
    if (megrt_session_run(session, "no_such_entry", NULL, 0, &none) ==
        MEGRT_RUNTIME_ERROR)
      printf("error: %s\n", megrt_last_error());
  }
  ok = 1;

done:
  for (i = 0; inputs && i < numInputs; ++i)
    free((void *)inputs[i].data);
  free(inputs);
  megrt_outputs_destroy(outputs);
  megrt_session_destroy(session);
  megrt_program_destroy(program);
  return ok ? 0 : 1;
}
