#include "core/storage.h"

namespace tapestry {

Storage::Storage(std::size_t nbytes, Device device)
    : data_(context(device).allocator().allocate(nbytes)), nbytes_(nbytes), device_(device) {}

Storage::~Storage() { context(device_).allocator().deallocate(data_, nbytes_); }

}  // namespace tapestry
