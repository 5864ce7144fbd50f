# packaging/deb.mk: `make deb` and `make test-packaging-deb`.
#
# The programs are built by the rules above; `deb` copies them, with the
# files of packaging/ and packaging/debian/, into a staging tree under
# $(BUILD)/pkg/stage and runs dpkg-buildpackage there, so the source tree
# gets no debian/ directory and no build leftovers.  The changelog is written
# at that moment from VERSION, the one place the version lives.  llmd-cuda is
# built only when the CUDA backend was (else the pkg.llmd.nocuda profile).

DEB_DIR    := $(BUILD)/pkg
DEB_STAGE  := $(DEB_DIR)/stage/llmd-$(VERSION)
DEB_CUDA_SO := $(BUILD)/lib/libllmd_cuda.so
DEB_FILE   := $(DEB_DIR)/llmd_$(VERSION)_amd64.deb
DEB_MAINT  := llmd developers <llmd-dev@example.org>

.PHONY: deb test-packaging-deb
deb: $(BUILD)/bin/llmd $(BUILD)/bin/llmadmin
	rm -rf $(DEB_DIR)/stage $(DEB_DIR)/*.deb && mkdir -p $(DEB_STAGE)/bin $(DEB_STAGE)/etc \
	  $(DEB_STAGE)/man $(DEB_STAGE)/completions $(DEB_STAGE)/lib
	cp -R packaging/debian $(DEB_STAGE)/debian
	cp packaging/llmd.service $(DEB_STAGE)/debian/llmd.service
	cp $(BUILD)/bin/llmd $(BUILD)/bin/llmadmin $(DEB_STAGE)/bin/
	cp packaging/llmd.conf $(DEB_STAGE)/etc/llmd.conf
	cp packaging/llmd.8 packaging/llmd.conf.5 admin/llmadmin.8 $(DEB_STAGE)/man/
	cp admin/llmadmin.bash-completion $(DEB_STAGE)/completions/llmadmin
	if [ -f $(DEB_CUDA_SO) ]; then cp $(DEB_CUDA_SO) $(DEB_STAGE)/lib/; fi
	printf 'llmd (%s) unstable; urgency=medium\n\n  * Release %s.\n\n -- %s  %s\n' \
	  '$(VERSION)' '$(VERSION)' '$(DEB_MAINT)' "$$(date -R)" > $(DEB_STAGE)/debian/changelog
	cd $(DEB_STAGE) && dpkg-buildpackage -b -us -uc \
	  $(if $(wildcard $(DEB_CUDA_SO)),,-Ppkg.llmd.nocuda)
	mv $(DEB_DIR)/stage/*.deb $(DEB_DIR)/
	rm -rf $(DEB_DIR)/stage
	@ls -l $(DEB_DIR)/*.deb

# Lintian must report no errors; the unit is verified against the installed
# package (systemd-analyze checks that ExecStart's binary exists), inside
# scripts/test-packaging.sh, which installs, exercises and purges the .deb.
test-packaging-deb: deb
	lintian --fail-on error \
	  $(DEB_DIR)/*.deb
	sh scripts/test-packaging.sh $(DEB_FILE)
