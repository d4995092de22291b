// The aclnn declarations the torch_npu extension needs and the torch-npu wheel does not ship: the tensor and
// array handles of CANN's aclnn API and the two-phase functions the op package build generates for our OpDefs.
// Written from CANN's documented signatures (aclCreateTensor, aclCreateIntArray, aclDestroyTensor,
// aclDestroyIntArray; the generation rule of a custom operator's aclnn API), not copied from any header.
// They must stay compatible with CANN's own: tests/test_npu_extension.py compiles this file together with the
// CANN 8.1 snapshot's aclnn/acl_meta.h, which rejects any conflicting redeclaration.
#pragma once

#include <cstdint>

#include "acl/acl.h"  // aclDataType, aclFormat, aclrtStream, aclGetRecentErrMsg (the wheel ships acl/)

extern "C" {
typedef struct aclOpExecutor aclOpExecutor;
typedef struct aclTensor aclTensor;
typedef struct aclIntArray aclIntArray;
typedef int32_t aclnnStatus;

aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum, aclDataType dataType, const int64_t* stride,
                           int64_t offset, aclFormat format, const int64_t* storageDims, uint64_t storageDimsNum,
                           void* tensorData);
aclnnStatus aclDestroyTensor(const aclTensor* tensor);
aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size);
aclnnStatus aclDestroyIntArray(const aclIntArray* array);
}

// The API the op package build generates for each OpDef, declared from the op table by the documented rule
// (scripts/op_files/npu.py aclnn_parameters). Declared rather than included from the generated aclnn_*.h, so
// nothing depends on their file names.
#include "acts_aclnn_ops.h"
