# Image decoders and the media fetcher of src/vision, all from Debian packages (scripts/setup-debian.sh).
pkg_check_modules(TURBOJPEG REQUIRED IMPORTED_TARGET libturbojpeg)
pkg_check_modules(LIBPNG REQUIRED IMPORTED_TARGET libpng)
pkg_check_modules(LIBWEBP REQUIRED IMPORTED_TARGET libwebp)
find_package(CURL REQUIRED)
