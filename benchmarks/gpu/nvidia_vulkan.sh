# Sourced by the h200_*.sh scripts: on the lent machine, point the Vulkan and EGL loaders at NVIDIA's
# driver for the WebGPU EP; elsewhere keep the caller's Vulkan (a software driver, say).
nvidia_vulkan_env() {
  if [ -e /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
  fi
}
