/* nnc compiled-model C ABI. A model.so written by `nnc model.onnx -o model.so` exports exactly these
 * functions; the in-process JIT (nnc/jit.h) returns the same nnc_model handle. Stable: fields are
 * only ever appended, and every struct starts with its own size where it may grow.
 *
 * Thread safety: distinct nnc_model handles are independent. nnc_model_run on one handle from
 * several threads at once is serialised by the handle (runs execute one after another). */
#ifndef NNC_MODEL_H
#define NNC_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NNC_ABI_VERSION 1

/* The exported functions; everything else in a model.so is hidden. */
#if defined(_WIN32)
#define NNC_API
#else
#define NNC_API __attribute__((visibility("default")))
#endif

typedef enum nnc_status {
  NNC_OK = 0,
  NNC_ERROR_INVALID_ARGUMENT = 1, /* null pointer, wrong count, unknown name */
  NNC_ERROR_SHAPE_MISMATCH = 2,
  NNC_ERROR_DTYPE_MISMATCH = 3,
  NNC_ERROR_OUT_OF_MEMORY = 4,
  NNC_ERROR_RUNTIME = 5, /* a kernel reported an error (e.g. an index out of range) */
  NNC_ERROR_NO_DEVICE = 6,
  NNC_ERROR_INTERNAL = 7
} nnc_status;

/* Element types; the numbers are ONNX TensorProto.DataType's. */
typedef enum nnc_dtype {
  NNC_DTYPE_F32 = 1,
  NNC_DTYPE_U8 = 2,
  NNC_DTYPE_I8 = 3,
  NNC_DTYPE_U16 = 4,
  NNC_DTYPE_I16 = 5,
  NNC_DTYPE_I32 = 6,
  NNC_DTYPE_I64 = 7,
  NNC_DTYPE_BOOL = 9,
  NNC_DTYPE_F16 = 10,
  NNC_DTYPE_F64 = 11,
  NNC_DTYPE_U32 = 12,
  NNC_DTYPE_U64 = 13,
  NNC_DTYPE_BF16 = 16
} nnc_dtype;

#define NNC_MAX_RANK 8

/* Describes one input or output of a model. */
typedef struct nnc_tensor_info {
  const char *name;
  nnc_dtype dtype;
  int32_t rank;
  int64_t shape[NNC_MAX_RANK];
} nnc_tensor_info;

/* A caller-owned buffer passed to nnc_model_run. shape/rank/dtype are checked against the model;
 * size_bytes must be at least the tensor's byte size. data must be aligned to the element size
 * (4 for f32, 8 for i64, ...; malloc'd memory always is): NNC_ERROR_INVALID_ARGUMENT otherwise. */
typedef struct nnc_tensor {
  void *data;
  size_t size_bytes;
  nnc_dtype dtype;
  int32_t rank;
  const int64_t *shape;
} nnc_tensor;

/* CUDA Graphs for a cuda model (nnc_options.cuda_graphs). */
typedef enum nnc_cuda_graphs {
  NNC_CUDA_GRAPHS_DEFAULT = 0, /* on, unless the environment sets NNC_CUDA_GRAPHS=0 */
  NNC_CUDA_GRAPHS_ON = 1,
  NNC_CUDA_GRAPHS_OFF = 2
} nnc_cuda_graphs;

/* Zero-initialise, set struct_size, then the fields you need: a zero field means the default. */
typedef struct nnc_options {
  size_t struct_size;  /* sizeof(nnc_options) */
  int32_t num_threads; /* 0: one per core (NNC_NUM_THREADS overrides) */
  int32_t reserved;    /* the first version's padding: never read (old callers may leave it unset) */
  /* cuda models only (a cpu model refuses device_buffers = 1 and ignores cuda_graphs): */
  int32_t device_buffers; /* 1: nnc_tensor.data of inputs and outputs are CUDA device pointers
                             (CUdeviceptr values) on the model's GPU, copied device-to-device;
                             0: host memory */
  int32_t cuda_graphs;    /* an nnc_cuda_graphs value */
} nnc_options;

typedef struct nnc_model nnc_model;

/* opts may be NULL. On failure *m is set to NULL and nnc_last_error() says why. */
NNC_API nnc_status nnc_model_create(nnc_model **m, const nnc_options *opts);
NNC_API size_t nnc_model_num_inputs(const nnc_model *m);
NNC_API size_t nnc_model_num_outputs(const nnc_model *m);
NNC_API nnc_status nnc_model_input_info(const nnc_model *m, size_t index, nnc_tensor_info *info);
NNC_API nnc_status nnc_model_output_info(const nnc_model *m, size_t index, nnc_tensor_info *info);
/* inputs/outputs in the order of the info functions; outputs are written in place. */
NNC_API nnc_status nnc_model_run(nnc_model *m, const nnc_tensor *inputs, size_t num_inputs, nnc_tensor *outputs,
                                 size_t num_outputs);
/* The message of the last failed call on m ("" if none). Valid until the next call on m. */
NNC_API const char *nnc_model_last_error(const nnc_model *m);
/* The message of the last failed nnc_model_create on this thread (or of a call given a NULL model). */
NNC_API const char *nnc_last_error(void);
NNC_API void nnc_model_destroy(nnc_model *m);

#ifdef __cplusplus
}
#endif

#endif /* NNC_MODEL_H */
