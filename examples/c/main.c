/* Calls a model.so compiled by nnc from C, through the stable C ABI in <nnc/model.h>.
 *   cc main.c -I<nnc>/include model.so -Wl,-rpath,'$ORIGIN' -o run_model
 *   ./run_model input.bin output.bin     (raw little-endian tensors, one input and one output) */
#include <nnc/model.h>
#include <stdio.h>
#include <stdlib.h>

static size_t numel(const nnc_tensor_info *info) {
  size_t n = 1;
  for (int i = 0; i < info->rank; ++i) n *= (size_t)info->shape[i];
  return n;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s input.bin output.bin\n", argv[0]);
    return 2;
  }
  nnc_model *model = NULL;
  if (nnc_model_create(&model, NULL) != NNC_OK) {
    fprintf(stderr, "nnc_model_create: %s\n", nnc_last_error());
    return 1;
  }
  nnc_tensor_info in_info, out_info;
  nnc_model_input_info(model, 0, &in_info);
  nnc_model_output_info(model, 0, &out_info);
  printf("model: %zu input(s), %zu output(s); input '%s' rank %d, output '%s' rank %d\n", nnc_model_num_inputs(model),
         nnc_model_num_outputs(model), in_info.name, in_info.rank, out_info.name, out_info.rank);
  if (in_info.dtype != NNC_DTYPE_F32 || out_info.dtype != NNC_DTYPE_F32) {
    fprintf(stderr, "this example handles f32 models only\n");
    return 1;
  }
  size_t in_n = numel(&in_info), out_n = numel(&out_info);
  float *in = malloc(in_n * sizeof(float)), *out = malloc(out_n * sizeof(float));
  FILE *f = fopen(argv[1], "rb");
  if (!f || fread(in, sizeof(float), in_n, f) != in_n) {
    fprintf(stderr, "cannot read %zu floats from %s\n", in_n, argv[1]);
    return 1;
  }
  fclose(f);
  nnc_tensor input = {in, in_n * sizeof(float), NNC_DTYPE_F32, in_info.rank, in_info.shape};
  nnc_tensor output = {out, out_n * sizeof(float), NNC_DTYPE_F32, out_info.rank, out_info.shape};
  if (nnc_model_run(model, &input, 1, &output, 1) != NNC_OK) {
    fprintf(stderr, "nnc_model_run: %s\n", nnc_model_last_error(model));
    return 1;
  }
  /* A wrong shape is an error with a message, not a crash. */
  int64_t bad_shape[NNC_MAX_RANK] = {0};
  nnc_tensor bad = {in, in_n * sizeof(float), NNC_DTYPE_F32, in_info.rank, bad_shape};
  if (nnc_model_run(model, &bad, 1, &output, 1) == NNC_OK) {
    fprintf(stderr, "a wrong input shape was accepted\n");
    return 1;
  }
  printf("wrong shape rejected: %s\n", nnc_model_last_error(model));
  f = fopen(argv[2], "wb");
  fwrite(out, sizeof(float), out_n, f);
  fclose(f);
  printf("output[0..3] = %f %f %f\n", out[0], out[1], out[2]);
  nnc_model_destroy(model);
  free(in);
  free(out);
  return 0;
}
