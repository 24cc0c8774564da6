# Writes the bytes of INPUT to OUTPUT as `const std::vector<uint8_t> NAME` in
# namespace megrt::test (cmake -DINPUT=... -DOUTPUT=... -DNAME=... -P this).
file(READ ${INPUT} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE ${OUTPUT}
  "// Generated from ${INPUT} by EmbedBytes.cmake.\n"
  "#include <cstdint>\n#include <vector>\n\n"
  "namespace megrt::test {\n"
  "extern const std::vector<uint8_t> ${NAME};\n"
  "const std::vector<uint8_t> ${NAME} = {${bytes}};\n"
  "} // namespace megrt::test\n")
