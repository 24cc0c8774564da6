// Checks a CUDA module's cubin before the driver, which is given no size,
// reads it.
#include "cuda/CubinCheck.h"

#include "Fail.h"

#include <cstdint>
#include <cstring>
#include <elf.h>

namespace megrt {
namespace {

/// The header of a fatbin, as in the toolkit's fatbinary_section.h.
struct FatbinHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t headerSize;
  uint64_t fatSize;
};
constexpr uint32_t kFatbinMagic = 0xBA55ED50;

/// Throws unless `count` entries of `entrySize` bytes at `offset` fit.
void checkTable(uint64_t offset, uint64_t count, uint64_t entrySize,
                size_t size, const char *table, const std::string &what) {
  uint64_t bytes, end;
  if (__builtin_mul_overflow(count, entrySize, &bytes) ||
      __builtin_add_overflow(offset, bytes, &end))
    end = UINT64_MAX;
  if (end > size)
    fail(what, ": the cubin of ", size, " bytes is truncated (", table,
         " up to byte ", end, ")");
}

void checkElf(const uint8_t *image, size_t size, const std::string &what) {
  Elf64_Ehdr header;
  if (size < sizeof(header))
    fail(what, ": the cubin of ", size, " bytes is shorter than an ELF header");
  std::memcpy(&header, image, sizeof(header));
  if (header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_ident[EI_DATA] != ELFDATA2LSB || header.e_machine != EM_CUDA)
    fail(what, ": the cubin is not a 64-bit CUDA ELF image (ELF machine ",
         header.e_machine, ", expected ", EM_CUDA, ")");
  if (header.e_shnum > 0 && header.e_shentsize != sizeof(Elf64_Shdr))
    fail(what, ": the cubin has section headers of ", header.e_shentsize,
         " bytes, expected ", sizeof(Elf64_Shdr));
  if (header.e_phnum > 0 && header.e_phentsize != sizeof(Elf64_Phdr))
    fail(what, ": the cubin has program headers of ", header.e_phentsize,
         " bytes, expected ", sizeof(Elf64_Phdr));
  checkTable(header.e_shoff, header.e_shnum, sizeof(Elf64_Shdr), size,
             "section headers", what);
  checkTable(header.e_phoff, header.e_phnum, sizeof(Elf64_Phdr), size,
             "program headers", what);
  for (uint16_t i = 0; i < header.e_shnum; ++i) {
    Elf64_Shdr section;
    std::memcpy(&section, image + header.e_shoff + i * sizeof(section),
                sizeof(section));
    if (section.sh_type != SHT_NOBITS)
      checkTable(section.sh_offset, 1, section.sh_size, size,
                 concat("section ", i).c_str(), what);
  }
  for (uint16_t i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment;
    std::memcpy(&segment, image + header.e_phoff + i * sizeof(segment),
                sizeof(segment));
    checkTable(segment.p_offset, 1, segment.p_filesz, size,
               concat("segment ", i).c_str(), what);
  }
}

} // namespace

void checkCubinImage(const uint8_t *image, size_t size,
                     const std::string &what) {
  if (size >= SELFMAG && std::memcmp(image, ELFMAG, SELFMAG) == 0)
    return checkElf(image, size, what);
  FatbinHeader header;
  if (size >= sizeof(header)) {
    std::memcpy(&header, image, sizeof(header));
    if (header.magic == kFatbinMagic) {
      checkTable(header.headerSize, 1, header.fatSize, size, "fatbin payload",
                 what);
      return;
    }
  }
  fail(what, ": the cubin is neither a CUDA ELF image nor a fatbin");
}

} // namespace megrt
