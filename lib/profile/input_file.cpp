#include "profile/input_file.h"

#include <zstd.h>

#include <cstring>
#include <vector>

#include "core/error.h"
#include "io/mapped_file.h"
#include "io/text_file.h"

namespace eq::profile {

std::string read_input_file(const std::string& path) {
  io::MappedFile f(path);
  if (f.size() < 4 || std::memcmp(f.data(), "\x28\xb5\x2f\xfd", 4) != 0) return io::read_file_bytes(path);
  ZSTD_DStream* ds = ZSTD_createDStream();
  if (!ds) fail(ErrorKind::kResource, path + ": cannot create a zstd stream");
  std::string out;
  std::vector<char> buf(ZSTD_DStreamOutSize());
  ZSTD_inBuffer in{f.data(), f.size(), 0};
  size_t last = 0;
  for (;;) {
    ZSTD_outBuffer ob{buf.data(), buf.size(), 0};
    last = ZSTD_decompressStream(ds, &ob, &in);
    if (ZSTD_isError(last)) {
      const std::string msg = ZSTD_getErrorName(last);
      ZSTD_freeDStream(ds);
      invalid(path + ": corrupt zstd data: " + msg);
    }
    out.append(buf.data(), ob.pos);
    // Done when the input is consumed and the decoder holds nothing more.
    if (in.pos == in.size && ob.pos < ob.size) break;
  }
  ZSTD_freeDStream(ds);
  if (last != 0) invalid(path + ": truncated zstd data");
  return out;
}

}  // namespace eq::profile
