# Writes the fatbin INPUT (a .cu file compiled by nvcc) to the C++ source
# OUTPUT as megrt::SYMBOL and megrt::SYMBOLSize, so that the runtime carries
# its kernels in itself (cmake -DINPUT=... -DOUTPUT=... -DSYMBOL=... -P
# this). The array is 64-byte aligned: the driver reads the image in place.
file(READ ${INPUT} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE ${OUTPUT}
  "// Generated from ${INPUT} by EmbedFatbin.cmake.\n"
  "#include <cstddef>\n#include <cstdint>\n\n"
  "namespace megrt {\n"
  "extern const uint8_t ${SYMBOL}[];\n"
  "extern const size_t ${SYMBOL}Size;\n"
  "alignas(64) const uint8_t ${SYMBOL}[] = {${bytes}};\n"
  "const size_t ${SYMBOL}Size = sizeof(${SYMBOL});\n"
  "} // namespace megrt\n")
