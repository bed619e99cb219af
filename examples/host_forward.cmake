# examples/host_forward: loads a flashc PTX, runs the forward on random
# inputs, checks it against a float64 CPU reference and times it. Included by
# examples/CMakeLists.txt and by runtime/CMakeLists.txt when the runtime is
# built on its own; only where the runtime builds (it needs the CUDA toolkit).
if(TARGET flashc_runtime AND TARGET CUDA::cuda_driver AND NOT TARGET host_forward)
  add_executable(host_forward ${CMAKE_CURRENT_LIST_DIR}/host_forward.c)
  # The example calls the driver itself (memory, events); the runtime does not.
  target_link_libraries(host_forward PRIVATE flashc_runtime CUDA::cuda_driver m)
  set_target_properties(host_forward PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                        ${CMAKE_BINARY_DIR}/examples)
endif()
