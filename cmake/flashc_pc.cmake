# flashc_install_pc(NAME LIB DESCRIPTION PRIVATE_LIBS): writes NAME.pc from
# flashc.pc.in (relocatable: its prefix is found from the file's own place)
# and installs it into LIBDIR/pkgconfig.
include(GNUInstallDirs)
function(flashc_install_pc name lib description private)
  file(RELATIVE_PATH FLASHC_PC_UP /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
  set(FLASHC_PC_NAME ${name})
  set(FLASHC_PC_LIB ${lib})
  set(FLASHC_PC_DESCRIPTION ${description})
  set(FLASHC_PC_PRIVATE ${private})
  configure_file(${CMAKE_CURRENT_FUNCTION_LIST_DIR}/flashc.pc.in
                 ${CMAKE_CURRENT_BINARY_DIR}/${name}.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/${name}.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()
