// The implementation of stb_image and stb_image_resize, compiled from Debian's libstb-dev headers
// into libaether (rather than linked from its libstb.a) so that the ASan/UBSan and fuzz builds
// instrument the decoders too (fuzz/image_fuzz.cpp). Only the formats of image folders
// (aether/data/image_folder.h, kImageExtensions) that no other library reads are compiled in: BMP
// and GIF (image_file.h: libpng reads PNG, libjpeg-turbo JPEG, and pnm.cpp PNM, as pnm.h says why).
// No TGA, PSD, HDR or PIC decoder. TGA has no signature: stb_image takes
// any file whose first bytes pass a loose check for one, and returns a truncated one's missing rows
// as its buffer's old bytes (found by fuzz/image_fuzz.cpp).
// Third-party code: compiled without warnings and with hidden symbols (CMakeLists.txt).
#include <cstdlib>

// Zeroed allocations: stb_image's decoders read state they never wrote when a file lacks a part
// (its JPEG decoder, since replaced by libjpeg-turbo, decoded a file without the quantisation table
// its frame names to the heap's old bytes; found by fuzz/image_fuzz.cpp). With calloc such a file
// decodes the same every time, from zeros.
#define STBI_MALLOC(size) std::calloc(1, size)
#define STBI_REALLOC(p, size) std::realloc(p, size)
#define STBI_FREE(p) std::free(p)
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_BMP
#define STBI_ONLY_GIF
#include <stb_image.h>

#define STB_IMAGE_RESIZE_IMPLEMENTATION
#include <stb_image_resize.h>
