# Writes two pkg-config files for a library: one for the build tree
# (build/lib/pkgconfig, libdir = build/lib) so programs can build against a
# plain build, and one that `cmake --install` (or the package) puts next to
# the installed library (<libdir>/softverbs/pkgconfig), whose paths are
# relative to itself: the package installs into /usr whatever prefix the
# build was configured with.
function(softverbs_pkgconfig name)
  set(PC_LIBDIR ${CMAKE_BINARY_DIR}/lib)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${name}.pc.in ${CMAKE_BINARY_DIR}/lib/pkgconfig/${name}.pc @ONLY)
  set(PC_LIBDIR "\${pcfiledir}/..")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${name}.pc.in ${CMAKE_BINARY_DIR}/pkgconfig-install/${name}.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/pkgconfig-install/${name}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/softverbs/pkgconfig)
endfunction()
