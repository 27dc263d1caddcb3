# cmake -DARCHIVE=libaether.a -DADD=libother.a -DAR=ar -P bundle_archive.cmake
# Adds the members of ADD to the static library ARCHIVE (an ar MRI script: ar -M), so that
# ARCHIVE needs no link-time dependency on ADD. The build re-creates ARCHIVE on every link, and
# this runs after each (POST_BUILD), so it never adds a library twice.
foreach(v ARCHIVE ADD AR)
  if(NOT ${v})
    message(FATAL_ERROR "bundle_archive: ${v} is not set")
  endif()
endforeach()
set(tmp "${ARCHIVE}.bundle.a")
file(REMOVE "${tmp}")
file(WRITE "${ARCHIVE}.mri" "CREATE ${tmp}\nADDLIB ${ARCHIVE}\nADDLIB ${ADD}\nSAVE\nEND\n")
execute_process(COMMAND "${AR}" -M INPUT_FILE "${ARCHIVE}.mri" RESULT_VARIABLE rc ERROR_VARIABLE err)
file(REMOVE "${ARCHIVE}.mri")
if(NOT rc EQUAL 0)
  file(REMOVE "${tmp}")
  message(FATAL_ERROR "bundle_archive: ${AR} -M could not merge ${ADD} into ${ARCHIVE}: ${err}")
endif()
file(RENAME "${tmp}" "${ARCHIVE}")
