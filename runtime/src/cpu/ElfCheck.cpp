// Checks a CPU module's ELF image before dlopen sees it.
#include "cpu/ElfCheck.h"

#include "Fail.h"

#include <cstring>
#include <elf.h>

namespace megrt {
namespace {

#if defined(__x86_64__)
constexpr uint16_t kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
#else
#error "megrt's CPU backend supports x86_64 and aarch64 hosts"
#endif

} // namespace

void checkSharedObjectImage(const uint8_t *image, size_t size) {
  if (size < SELFMAG || std::memcmp(image, ELFMAG, SELFMAG) != 0)
    fail("CPU module is not an ELF shared object");
  Elf64_Ehdr header;
  if (size < sizeof(header))
    fail("CPU module is truncated: ", size,
         " bytes is less than the ELF header");
  std::memcpy(&header, image, sizeof(header));
  if (header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_ident[EI_DATA] != ELFDATA2LSB)
    fail("CPU module is not a 64-bit little-endian ELF object");
  if (header.e_type != ET_DYN)
    fail("CPU module is an ELF object of type ", header.e_type,
         ", expected a shared object (", ET_DYN, ")");
  if (header.e_machine != kHostMachine)
    fail("CPU module is for ELF machine ", header.e_machine,
         ", this machine is ", kHostMachine);
  if (header.e_phentsize != sizeof(Elf64_Phdr))
    fail("CPU module has program headers of ", header.e_phentsize,
         " bytes, expected ", sizeof(Elf64_Phdr));
  uint64_t tableEnd =
      header.e_phoff + uint64_t(header.e_phnum) * sizeof(Elf64_Phdr);
  if (header.e_phoff > size || tableEnd > size)
    fail("CPU module is truncated: its program headers end at byte ", tableEnd,
         " of ", size);
  for (uint16_t i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment;
    std::memcpy(&segment, image + header.e_phoff + i * sizeof(segment),
                sizeof(segment));
    if (segment.p_type != PT_LOAD && segment.p_type != PT_DYNAMIC)
      continue;
    uint64_t end;
    if (__builtin_add_overflow(segment.p_offset, segment.p_filesz, &end) ||
        end > size)
      fail("CPU module is truncated: segment ", i, " needs bytes up to ",
           segment.p_offset + segment.p_filesz, ", the image has ", size);
  }
}

} // namespace megrt
