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

// The API the op package build generates for each OpDef (documented rule: the inputs in order as
// const aclTensor*, the attributes in order with float as double and names in lowerCamelCase, the single
// output as aclTensor* out, then the workspace size and the executor). Declared here rather than included
// from the generated aclnn_*.h, so nothing depends on their file names.
extern "C" {
aclnnStatus aclnnActsLeakyReluGetWorkspaceSize(const aclTensor* x, double negativeSlope, aclTensor* out,
                                               uint64_t* workspaceSize, aclOpExecutor** executor);
aclnnStatus aclnnActsLeakyRelu(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream);
aclnnStatus aclnnActsLeakyReluGradGetWorkspaceSize(const aclTensor* dy, const aclTensor* saved, double negativeSlope,
                                                   aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor);
aclnnStatus aclnnActsLeakyReluGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                   aclrtStream stream);
aclnnStatus aclnnActsRReluGetWorkspaceSize(const aclTensor* x, const aclTensor* seed, double lower, double upper,
                                           aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor);
aclnnStatus aclnnActsRRelu(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream);
aclnnStatus aclnnActsRReluGradGetWorkspaceSize(const aclTensor* dy, const aclTensor* saved, const aclTensor* seed,
                                               double lower, double upper, aclTensor* out, uint64_t* workspaceSize,
                                               aclOpExecutor** executor);
aclnnStatus aclnnActsRReluGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream);
// several outputs: each named <output>Out; an input that is also an output (in place): <input>Ref, not
// const, in the inputs' place; list attributes as const aclIntArray*, bool as bool
aclnnStatus aclnnActsBatchNormLeakyReluGetWorkspaceSize(const aclTensor* x, const aclTensor* weight,
                                                        const aclTensor* bias, aclTensor* runningMeanRef,
                                                        aclTensor* runningVarRef, double negativeSlope, double eps,
                                                        double momentum, bool updateRunningStats, aclTensor* yOut,
                                                        aclTensor* saveMeanOut, aclTensor* saveInvstdOut,
                                                        uint64_t* workspaceSize, aclOpExecutor** executor);
aclnnStatus aclnnActsBatchNormLeakyRelu(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                        aclrtStream stream);
aclnnStatus aclnnActsBatchNormLeakyReluGradGetWorkspaceSize(const aclTensor* dy, const aclTensor* y,
                                                            const aclTensor* weight, const aclTensor* bias,
                                                            const aclTensor* save_invstd, double negativeSlope,
                                                            aclTensor* dxOut, aclTensor* gradWeightOut,
                                                            aclTensor* gradBiasOut, uint64_t* workspaceSize,
                                                            aclOpExecutor** executor);
aclnnStatus aclnnActsBatchNormLeakyReluGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                            aclrtStream stream);
aclnnStatus aclnnActsConvBnLeakyReluEvalGetWorkspaceSize(const aclTensor* x, const aclTensor* weight,
                                                         const aclTensor* bias, const aclIntArray* strides,
                                                         const aclIntArray* pads, const aclIntArray* dilations,
                                                         double negativeSlope, aclTensor* out, uint64_t* workspaceSize,
                                                         aclOpExecutor** executor);
aclnnStatus aclnnActsConvBnLeakyReluEval(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                         aclrtStream stream);
}
