# The NPU side of the build, included at the end of CMakeLists.txt (after the emulator targets).
#
# CANN toolkit, first one set wins:
#   -DASCEND_CANN_PACKAGE_PATH=<dir>, then $ASCEND_CANN_PACKAGE_PATH, then $ASCEND_HOME_PATH (set by
#   <CANN>/set_env.sh). A directory counts as a toolkit when it has include/acl/acl.h.
# With a toolkit: target npu_op_package runs scripts/build_npu.sh for ASCEND_ACTS_SOC (msopgen project ->
#   build_out/custom_opp_*.run with the generated aclnn API). It is part of `all` only with -DASCEND_ACTS_NPU=ON,
#   so the emulator build setup.py runs does not start it: setup.py builds the package for the wheel itself
#   (build_op_package, the same script).
# Without one: the emulator build only, and one STATUS line saying which variables were checked.
# Errors (FATAL_ERROR): -DASCEND_ACTS_NPU=ON without a toolkit; an explicit -DASCEND_CANN_PACKAGE_PATH that is
#   not a toolkit (a typo should not silently drop the NPU build); an unsupported ASCEND_ACTS_SOC.
# None of the CANN branch has been run against a real toolkit in this project's CI (docs/npu.md).

option(ASCEND_ACTS_NPU "Require the NPU build: fail without the CANN toolkit and build the op package with `all`" OFF)
set(ASCEND_ACTS_SOC "ascend910b" CACHE STRING
    "Short SoC name of the custom op package: ascend910b (Atlas A2) or ascend910_93 (Atlas A3)")
set_property(CACHE ASCEND_ACTS_SOC PROPERTY STRINGS ascend910b ascend910_93)
set(ASCEND_CANN_PACKAGE_PATH "" CACHE PATH
    "CANN toolkit directory; empty: $ASCEND_CANN_PACKAGE_PATH, then $ASCEND_HOME_PATH")

# The OpDefs in op_host/ are configured for these two SoCs (AICore().AddConfig); like the op project's
# ASCEND_COMPUTE_UNIT they take the short SoC name, not a chip name such as Ascend910B3 (docs/npu.md).
if(NOT ASCEND_ACTS_SOC MATCHES "^(ascend910b|ascend910_93)$")
  message(FATAL_ERROR "ascend_acts NPU: ASCEND_ACTS_SOC='${ASCEND_ACTS_SOC}' is not supported: use ascend910b "
                      "(Atlas A2, chips Ascend910B1-B4) or ascend910_93 (Atlas A3, chips Ascend910_93xx)")
endif()

set(_acts_cann "")
set(_acts_cann_source "")
if(NOT ASCEND_CANN_PACKAGE_PATH STREQUAL "")
  set(_acts_cann "${ASCEND_CANN_PACKAGE_PATH}")
  set(_acts_cann_source "-DASCEND_CANN_PACKAGE_PATH")
elseif(NOT "$ENV{ASCEND_CANN_PACKAGE_PATH}" STREQUAL "")
  set(_acts_cann "$ENV{ASCEND_CANN_PACKAGE_PATH}")
  set(_acts_cann_source "$ASCEND_CANN_PACKAGE_PATH")
elseif(NOT "$ENV{ASCEND_HOME_PATH}" STREQUAL "")
  set(_acts_cann "$ENV{ASCEND_HOME_PATH}")
  set(_acts_cann_source "$ASCEND_HOME_PATH")
endif()

set(_acts_missing "")
if(_acts_cann STREQUAL "")
  string(CONCAT _acts_missing "CANN toolkit not found: -DASCEND_CANN_PACKAGE_PATH, $ASCEND_CANN_PACKAGE_PATH "
                "and $ASCEND_HOME_PATH are all unset")
elseif(NOT EXISTS "${_acts_cann}/include/acl/acl.h")
  set(_acts_missing "${_acts_cann_source}=${_acts_cann} is not a CANN toolkit (no include/acl/acl.h there)")
  if(_acts_cann_source STREQUAL "-DASCEND_CANN_PACKAGE_PATH")
    message(FATAL_ERROR "ascend_acts NPU: ${_acts_missing}; pass the toolkit directory (the one set_env.sh "
                        "exports as ASCEND_HOME_PATH) or drop the option to build the emulator only")
  endif()
endif()

if(NOT _acts_missing STREQUAL "")
  if(ASCEND_ACTS_NPU)
    message(FATAL_ERROR "ascend_acts NPU: ASCEND_ACTS_NPU=ON but ${_acts_missing}. On an Ascend machine: "
                        "source <CANN>/set_env.sh, or pass -DASCEND_CANN_PACKAGE_PATH=<CANN toolkit dir>; "
                        "see docs/npu.md")
  endif()
  message(STATUS "ascend_acts NPU: ${_acts_missing}; building the emulator only (source <CANN>/set_env.sh or "
                 "pass -DASCEND_CANN_PACKAGE_PATH=<dir> to add the NPU op package, docs/npu.md)")
  return()
endif()

get_filename_component(_acts_root "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
if(ASCEND_ACTS_NPU)
  set(_acts_all ALL)
  set(_acts_when "with `all`")
else()
  set(_acts_all "")
  set(_acts_when "with `cmake --build ${CMAKE_BINARY_DIR} --target npu_op_package`")
endif()
add_custom_target(npu_op_package ${_acts_all}
  COMMAND "${CMAKE_COMMAND}" -E env "ASCEND_CANN_PACKAGE_PATH=${_acts_cann}" "ASCEND_COMPUTE_UNIT=${ASCEND_ACTS_SOC}"
          bash "${_acts_root}/scripts/build_npu.sh"
  WORKING_DIRECTORY "${_acts_root}"
  COMMENT "ascend_acts: building the AscendC custom op package for ${ASCEND_ACTS_SOC} (scripts/build_npu.sh)"
  USES_TERMINAL
  VERBATIM)
message(STATUS "ascend_acts NPU: CANN toolkit at ${_acts_cann} (from ${_acts_cann_source}); the custom op package "
               "for ${ASCEND_ACTS_SOC} builds ${_acts_when}")
