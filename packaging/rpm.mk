# packaging/rpm.mk: `make rpm` and `make test-packaging-rpm`.
#
# rpmbuild runs with its own _topdir under $(BUILD)/pkg/rpm, so nothing
# depends on ~/rpmbuild or the system's macros for paths.  The spec compiles
# nothing: it is handed the already-built $(BUILD)/bin and $(BUILD)/lib, the
# version from VERSION, and a SOURCES folder staged here from packaging/,
# admin/ and packaging/debian/copyright.  rpmbuild must name the file
# NAME-VERSION-RELEASE.ARCH.rpm; the final llmd-VERSION.x86_64.rpm (and
# llmd-cuda-VERSION.x86_64.rpm when the CUDA backend was built) is a copy.

RPM_DIR     := $(BUILD)/pkg
RPM_TOP     := $(abspath $(RPM_DIR))/rpm
RPM_SRC     := $(RPM_TOP)/SOURCES
RPM_RELEASE := 1
RPM_CUDA_SO := $(BUILD)/lib/libllmd_cuda.so
RPM_FILE    := $(RPM_DIR)/llmd-$(VERSION).x86_64.rpm
RPM_CUDA_FILE := $(RPM_DIR)/llmd-cuda-$(VERSION).x86_64.rpm
# Files the package installs, by the name they get in SOURCES.
RPM_INPUTS  := llmd.service=packaging/llmd.service llmd.conf=packaging/llmd.conf \
	llmd.8=packaging/llmd.8 llmd.conf.5=packaging/llmd.conf.5 \
	llmadmin.8=admin/llmadmin.8 llmadmin.bash-completion=admin/llmadmin.bash-completion \
	copyright=packaging/debian/copyright
# RPM_PLACEHOLDERS=1 stands an empty file in for an input not yet written, so
# the packaging can be tried early; the package made then is not releasable.
RPM_PLACEHOLDERS ?= 0

.PHONY: rpm test-packaging-rpm
rpm: $(BUILD)/bin/llmd $(BUILD)/bin/llmadmin
	rm -rf $(RPM_TOP) $(RPM_FILE) $(RPM_CUDA_FILE)
	mkdir -p $(RPM_SRC) $(RPM_TOP)/tmp
	@for pair in $(RPM_INPUTS); do \
	  name=$${pair%%=*}; from=$${pair#*=}; \
	  if [ -f "$$from" ]; then cp "$$from" $(RPM_SRC)/$$name; \
	  elif [ "$(RPM_PLACEHOLDERS)" = 1 ]; then \
	    echo "rpm: WARNING: $$from missing, placeholder packaged" >&2; \
	    echo "placeholder for $$from" > $(RPM_SRC)/$$name; \
	  else echo "rpm: $$from missing (RPM_PLACEHOLDERS=1 to package a placeholder)" >&2; \
	    exit 1; fi; \
	done
	rpmbuild -bb --quiet \
	  --define "_topdir $(RPM_TOP)" --define "_tmppath $(RPM_TOP)/tmp" \
	  --define "version $(VERSION)" --define "llmd_release $(RPM_RELEASE)" \
	  --define "llmd_build $(abspath $(BUILD))" \
	  --define "llmd_src $(RPM_SRC)" \
	  --define "with_cuda $(if $(wildcard $(RPM_CUDA_SO)),1,0)" \
	  packaging/rpm/llmd.spec
	cp $(RPM_TOP)/RPMS/x86_64/llmd-$(VERSION)-$(RPM_RELEASE).x86_64.rpm $(RPM_FILE)
	$(if $(wildcard $(RPM_CUDA_SO)),cp \
	  $(RPM_TOP)/RPMS/x86_64/llmd-cuda-$(VERSION)-$(RPM_RELEASE).x86_64.rpm $(RPM_CUDA_FILE))
	@ls -l $(RPM_DIR)/*.rpm

# Checks the built packages' file lists, attributes and scriptlets.
test-packaging-rpm: rpm
	sh packaging/rpm/check.sh $(RPM_FILE) $(if $(wildcard $(RPM_CUDA_SO)),$(RPM_CUDA_FILE))
